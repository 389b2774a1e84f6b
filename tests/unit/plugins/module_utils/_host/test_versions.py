"""_host.versions: parsing and comparing the version strings drivers, CUDA, torch and pip print."""

from ansible_collections.continuum.hydra.plugins.module_utils._host import versions


def test_version_tuple_and_major():
    assert versions.version_tuple("535.104.05") == (535, 104, 5)
    assert versions.version_tuple("2.5.1+cu124") == (2, 5, 1)
    assert versions.version_tuple(12.4) == (12, 4)
    assert versions.version_tuple("v1.2") is None and versions.version_tuple(None) is None
    assert versions.major_version("535.104.05") == 535 and versions.major_version("") is None


def test_matches_prefix_by_whole_components():
    assert versions.matches_prefix("2.5.1+cu124", "2.5")
    assert not versions.matches_prefix("2.51.0", "2.5")  # not a character prefix
    assert not versions.matches_prefix("2.5", "2.5.1") and not versions.matches_prefix(None, "2")


def test_release_drops_trailing_zeros_and_labels():
    assert versions.release("2.13.0+cpu") == (2, 13) == versions.release("2.13")
    assert versions.release("v1.2.0") == (1, 2) and versions.release("0") == (0,)
    assert versions.release("rc1") is None and versions.release(None) is None


def test_dotted_takes_only_a_whole_dotted_version():
    assert versions.dotted(" 535.104.05 ") == (535, 104, 5)
    assert versions.dotted("12") == (12,)
    for text in ("535.x", "535.", "v535", "2.5.1+cu124", "", None):
        assert versions.dotted(text) is None


def test_compare_pads_missing_components_with_zero():
    assert versions.compare((535, 104, 5), (535, 104)) == 1
    assert versions.compare((12,), (12, 0)) == 0
    assert versions.compare((525, 60, 13), (535, 54, 3)) == -1
    assert versions.compare((535, 54, 3), (535, 104)) == -1  # numeric, not textual

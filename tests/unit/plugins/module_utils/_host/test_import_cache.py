"""The payload finder: this collection's modules from a zip, compiled once, their code kept per user."""

import os
import sys
import zipfile

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host import import_cache

BASE = "ansible_collections/continuum/hydra/plugins/module_utils/_host/"
NAME = "ansible_collections.continuum.hydra.plugins.module_utils._host.zz_payload"


@pytest.fixture
def payload(tmp_path, monkeypatch):
    """A payload zip holding a package and a module of this collection; the finder and the modules removed after."""
    archive = tmp_path / "payload.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr(BASE + "zz_payload/__init__.py", "from . import leaf\nVALUE = leaf.HALF * 2\n")
        out.writestr(BASE + "zz_payload/leaf.py", "HALF = 21\n")
        out.writestr("ansible_collections/other/thing.py", "X = 1\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    before = list(sys.meta_path)
    yield str(archive)
    sys.meta_path[:] = before
    for name in [name for name in sys.modules if name.startswith(NAME)]:
        del sys.modules[name]


def fresh_import():
    for name in [name for name in sys.modules if name.startswith(NAME)]:
        del sys.modules[name]
    return __import__(NAME, fromlist=["VALUE"])


def entries(tmp_path):
    directory = tmp_path / "cache" / import_cache.CACHE_SUBDIR
    return sorted(os.listdir(directory)) if directory.is_dir() else []


def compiles(monkeypatch):
    """Count the compilations the loader does (its own compile, not the import system's)."""
    calls = []

    def counting(*args, **kwargs):
        calls.append(args[1])
        return compile(*args, **kwargs)
    monkeypatch.setattr(import_cache, "compile", counting, raising=False)
    return calls


def test_modules_of_the_payload_are_compiled_once_then_loaded_from_the_cache(payload, tmp_path, monkeypatch):
    calls = compiles(monkeypatch)
    assert import_cache.install(payload) is True
    module = fresh_import()
    assert module.VALUE == 42 and module.leaf.HALF == 21
    assert module.__file__ == os.path.join(payload, BASE + "zz_payload/__init__.py")
    assert [os.path.basename(path) for path in calls] == ["__init__.py", "leaf.py"]  # once each, not twice
    assert len(entries(tmp_path)) == 2
    del calls[:]
    assert fresh_import().VALUE == 42 and calls == []  # the next run: nothing compiled


def test_a_damaged_entry_is_compiled_again_and_replaced(payload, tmp_path, monkeypatch):
    import_cache.install(payload)
    fresh_import()
    directory = tmp_path / "cache" / import_cache.CACHE_SUBDIR
    for name in entries(tmp_path):
        (directory / name).write_bytes(b"\x00not marshal")
    calls = compiles(monkeypatch)
    assert fresh_import().VALUE == 42 and len(calls) == 2
    assert all((directory / name).read_bytes() != b"\x00not marshal" for name in entries(tmp_path))


def test_nothing_is_written_when_python_is_told_not_to(payload, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    import_cache.install(payload)
    assert fresh_import().VALUE == 42 and entries(tmp_path) == []


def test_a_cache_directory_others_can_write_is_not_used(tmp_path, monkeypatch):
    directory = tmp_path / "cache" / import_cache.CACHE_SUBDIR
    directory.mkdir(parents=True)
    directory.chmod(0o777)
    assert import_cache.cache_dir({"XDG_CACHE_HOME": str(tmp_path / "cache")}) is None
    directory.chmod(0o700)
    assert import_cache.cache_dir({"XDG_CACHE_HOME": str(tmp_path / "cache")}) == str(directory)


def test_an_unwritable_cache_still_imports(payload, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", "/proc/no-cache-here")
    import_cache.install(payload)
    assert fresh_import().VALUE == 42


def test_old_entries_go_when_a_new_one_is_written(payload, tmp_path):
    directory = tmp_path / "cache" / import_cache.CACHE_SUBDIR
    directory.mkdir(parents=True, mode=0o700)
    stale = directory / "stale-entry"
    stale.write_bytes(b"old")
    os.utime(stale, (1, 1))
    import_cache.install(payload)
    fresh_import()
    assert "stale-entry" not in entries(tmp_path) and len(entries(tmp_path)) == 2


def test_only_this_collections_modules_and_only_from_a_zip(payload):
    assert import_cache.install() is False  # imported from the checkout here: nothing to do
    import_cache.install(payload)
    finder = sys.meta_path[0]
    assert finder.find_spec("ansible_collections.other.thing") is None and finder.find_spec("json") is None
    assert import_cache.install(payload) is False  # one finder, however often modules call install()


UNUSED_UID = 54321  # no account on the test machine: a directory of "another, non-root user"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another user")
def test_a_cache_below_a_directory_of_another_non_root_user_is_not_used(tmp_path):
    # Issue 23: the cache directory itself was ours and 0700, but a parent belonged to another user, who can rename it
    # away and put a directory of their own, with code of their own, in its place.
    theirs = tmp_path / "shared"
    directory = theirs / "cache" / import_cache.CACHE_SUBDIR
    directory.mkdir(parents=True, mode=0o700)
    os.chown(theirs, UNUSED_UID, UNUSED_UID)
    environ = {"XDG_CACHE_HOME": str(theirs / "cache")}
    assert import_cache.cache_dir(environ) is None
    os.chown(theirs, 0, 0)  # root's, like / and /tmp: trusted
    assert import_cache.cache_dir(environ) == str(directory)


def test_a_cache_below_a_directory_others_may_write_without_the_sticky_bit_is_not_used(tmp_path):
    shared = tmp_path / "open"
    directory = shared / "cache" / import_cache.CACHE_SUBDIR
    directory.mkdir(parents=True, mode=0o700)
    shared.chmod(0o777)  # anyone may rename entries here
    environ = {"XDG_CACHE_HOME": str(shared / "cache")}
    assert import_cache.cache_dir(environ) is None
    shared.chmod(0o1777)  # sticky, like /tmp: only the owner of an entry may rename it
    assert import_cache.cache_dir(environ) == str(directory)

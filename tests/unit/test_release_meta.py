"""Release metadata: the execution environment files, galaxy.yml, the changelog config and tests/utils/release.sh."""
import fnmatch
import os
import re
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.run import HYDRA_VERSION
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

RELEASE_VENV_BIN = os.path.join(REPO, ".venv-release", "bin")


def load(*path):
    with open(os.path.join(REPO, *path)) as handle:
        return yaml.safe_load(handle)


def requirement_names(path):
    with open(os.path.join(REPO, path)) as handle:
        lines = (line.split("#", 1)[0].strip() for line in handle)
        return {re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0].lower() for line in lines if line}


def test_execution_environment_installs_the_collection_from_the_tarball_it_copies_into_the_context():
    ee = load("execution-environment.yml")
    assert ee["version"] == 3
    assert ee["dependencies"]["ansible_core"]["package_pip"] == "ansible-core>=2.19,<2.20"
    (collection,) = ee["dependencies"]["galaxy"]["collections"]
    (build_file,) = ee["additional_build_files"]
    # ansible-builder copies src into _build/<dest>/, which the galaxy stage sees as /build/<dest>/.
    copied_to = "/build/%s/%s" % (build_file["dest"], os.path.basename(build_file["src"]))
    assert collection == {"name": copied_to, "type": "file"}


def test_both_ee_definitions_name_one_existing_requirements_file():
    ee_python = load("execution-environment.yml")["dependencies"]["python"]
    meta = load("meta", "execution-environment.yml")
    assert meta["version"] == 1
    # The collection's meta file is read relative to the collection root, the repo's EE file relative to itself:
    # both are the repo root here.
    assert meta["dependencies"]["python"] == ee_python
    assert os.path.isfile(os.path.join(REPO, ee_python))


def test_ee_requirements_are_the_optional_packages_the_plugins_import():
    names = requirement_names("meta/ee-requirements.txt")
    assert names == {"nvidia-ml-py", "numpy"}
    imports = {"nvidia-ml-py": re.compile(r"^\s*import pynvml\b", re.M), "numpy": re.compile(r"^\s*import numpy\b", re.M)}
    for name, pattern in imports.items():
        found = False
        for root, _dirs, files in os.walk(os.path.join(REPO, "plugins")):
            for filename in files:
                if filename.endswith(".py"):
                    with open(os.path.join(root, filename)) as handle:
                        found = found or bool(pattern.search(handle.read()))
        assert found, "%s is in meta/ee-requirements.txt but no plugin imports it" % name
    # Everything test-side is installed in .venv too: the EE packages are a subset of the test requirements.
    assert names <= requirement_names("tests/requirements.txt")


def test_galaxy_yml_has_no_placeholder_urls_and_ignores_local_build_state():
    galaxy = load("galaxy.yml")
    for key in ("repository", "documentation", "homepage", "issues"):
        value = galaxy.get(key)
        assert value is None or not re.search(r"example\.(invalid|com|org)", value), "%s: %s" % (key, value)
    ignore = galaxy["build_ignore"]
    # ansible-galaxy matches build_ignore with fnmatch against each path relative to the collection root.
    for path in (".venv-release", ".venv-newest-core", ".mypy_cache", ".ruff_cache", ".pytest_cache", "build",
                 "tests/output", "collections"):
        assert any(fnmatch.fnmatch(path, pattern) for pattern in ignore), "%s would go into the tarball" % path
    for path in ("plugins", "roles", "meta", "docs", "changelogs", "execution-environment.yml"):
        assert not any(fnmatch.fnmatch(path, pattern) for pattern in ignore), "%s would be left out" % path


def test_changelog_config_writes_markdown_next_to_galaxy_yml():
    config = load("changelogs", "config.yaml")
    assert config["output_formats"] == ["md"]
    assert config["changelog_filename_template"] == "../CHANGELOG.md"
    assert config["keep_fragments"] is False


def test_fragments_use_configured_sections_with_plain_string_items():
    config = load("changelogs", "config.yaml")
    sections = {name for name, _title in config["sections"]}
    sections |= {config["prelude_section_name"], config["trivial_section_name"]}
    fragments_dir = os.path.join(REPO, "changelogs", "fragments")
    for filename in sorted(os.listdir(fragments_dir)):
        if not filename.endswith((".yml", ".yaml")):
            continue
        fragment = load("changelogs", "fragments", filename)
        assert isinstance(fragment, dict) and fragment, filename
        for section, items in fragment.items():
            assert section in sections, "%s: unknown section %r" % (filename, section)
            if section == config["prelude_section_name"]:
                assert isinstance(items, str), filename
                continue
            assert isinstance(items, list), "%s: %s must be a list" % (filename, section)
            for item in items:
                assert isinstance(item, str), "%s: %s item is not a plain string: %r" % (filename, section, item)


@pytest.mark.parametrize("version", ["1.2", "v0.2.0", "0.2.0-rc1", ""])
def test_release_script_rejects_a_bad_version_in_one_line(version, tmp_path):
    result = subprocess.run([os.path.join(REPO, "tests", "utils", "release.sh"), version], capture_output=True, check=False,
                            text=True, timeout=30, env=dict(os.environ, RELEASE_VENV=str(tmp_path / "unused")))
    assert result.returncode == 2
    assert result.stderr == "release.sh: bad version '%s': expected MAJOR.MINOR.PATCH, e.g. 0.2.0\n" % version
    assert not (tmp_path / "unused").exists()


def antsibull_changelog():
    path = os.path.join(RELEASE_VENV_BIN, "antsibull-changelog")
    if not os.path.exists(path):
        pytest.skip("no .venv-release: tests/utils/release_check.sh makes it (and lints the fragments itself)")
    return path


def test_antsibull_changelog_lint_accepts_the_fragments():
    result = subprocess.run([antsibull_changelog(), "lint"], cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_antsibull_changelog_lint_rejects_a_fragment_whose_item_yaml_makes_a_dict(tmp_path):
    tool = antsibull_changelog()
    shutil.copy(os.path.join(REPO, "galaxy.yml"), tmp_path / "galaxy.yml")
    shutil.copytree(os.path.join(REPO, "changelogs"), tmp_path / "changelogs")
    (tmp_path / "changelogs" / "fragments" / "bad.yml").write_text("minor_changes:\n  - doctor: a new check\n")
    result = subprocess.run([tool, "lint"], cwd=str(tmp_path), capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode != 0
    assert "bad.yml" in result.stdout + result.stderr


def test_doctor_reports_the_collection_version_galaxy_yml_declares():
    assert HYDRA_VERSION == load("galaxy.yml")["version"]

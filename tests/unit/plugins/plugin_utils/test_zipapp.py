"""The zipapp builder both node-local programs are built with: the same bytes for the same sources, module_utils where
its imports expect it, and an archive a bare Python runs (-s -E: nothing but the zip on its path)."""

import os
import subprocess
import zipfile

import pytest

from ansible_collections.continuum.hydra.plugins.plugin_utils import _zipapp
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

PROGRAMS = {"slurm_healthcheck": "hydra_healthcheck_main.py", "tenant_guard": "hydra_tenant_guard_main.py"}


def build(tmp_path, role, name="program.pyz"):
    output = str(tmp_path / name)
    _zipapp.build(os.path.join(REPO, "roles", role, "files", PROGRAMS[role]), output)
    return output


def run(pyz, *argv):
    return subprocess.run(["/usr/bin/python3", "-s", "-E", pyz] + list(argv), capture_output=True, text=True, timeout=60,
                          check=False)


def test_the_archive_is_the_same_bytes_for_the_same_sources_with_every_module_util_inside(tmp_path):
    first, second = build(tmp_path, "tenant_guard", "a.pyz"), build(tmp_path, "tenant_guard", "b.pyz")
    with open(first, "rb") as a, open(second, "rb") as b:
        assert a.read() == b.read()
    assert not os.path.exists(first + ".tmp")
    with zipfile.ZipFile(first) as archive:
        infos = archive.infolist()
    names = [info.filename for info in infos]
    assert names == sorted(names) and not any("__pycache__" in name for name in names)
    assert {(info.date_time, info.external_attr) for info in infos} == {(_zipapp.STAMP, 0o644 << 16)}
    tree = os.path.join(REPO, "plugins", "module_utils")
    expected = {"ansible_collections/continuum/hydra/plugins/module_utils/" + os.path.relpath(os.path.join(d, f), tree)
                for d, _dirs, files in os.walk(tree) if "__pycache__" not in d for f in files if f.endswith(".py")}
    assert expected <= set(names) and "__main__.py" in names
    assert "ansible_collections/continuum/hydra/plugins/__init__.py" in names


@pytest.mark.parametrize("role, stderr", [
    ("tenant_guard", "hydra-tenant-guard: config /nonexistent.json: [Errno 2] No such file or directory: '/nonexistent.json'\n"),
    ("slurm_healthcheck", "hydra-healthcheck: ERROR: config: /nonexistent.json does not exist\n"),
])
def test_each_program_runs_from_its_archive_alone(tmp_path, role, stderr):
    proc = run(build(tmp_path, role), "--config", "/nonexistent.json")
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", stderr)

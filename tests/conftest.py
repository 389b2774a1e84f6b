"""Make the checkout importable as ansible_collections.continuum.hydra (pytest.ini puts collections/ on the path)."""

import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(REPO, "collections")


def _link_collection():
    link = os.path.join(COLLECTIONS, "ansible_collections", "continuum", "hydra")
    if not os.path.exists(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        try:
            os.symlink(REPO, link)
        except FileExistsError:
            pass  # another pytest-xdist worker made it first


_link_collection()
# A fresh clone has no collections/ until now: forget the import system's "no such folder" answer for it.
sys.path_importer_cache.pop(COLLECTIONS, None)


def pytest_collection_modifyitems(config, items):
    has_gpu = os.path.exists("/dev/nvidiactl")
    skip_gpu = pytest.mark.skip(reason="no NVIDIA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(skip_gpu)


# Tools the real-component tests drive; where one is missing those tests skip. In CI (CI=true) a skip
# would let a broken install pass quietly, so a missing tool stops the run instead.
CI_TOOLS = ("chromium", "promtool", "prometheus-node-exporter", "xmllint", "slurmctld", "slurmd", "munged", "ssh", "sshd", "iperf3")


def pytest_sessionstart(session):
    if os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
        return
    path = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin:/sbin"
    missing = [tool for tool in CI_TOOLS if not shutil.which(tool, path=path)]
    if missing:
        pytest.exit("CI: missing %s (tests/utils/system-deps.sh installs them)" % ", ".join(missing), returncode=3)


@pytest.fixture(scope="session")
def template_venv(tmp_path_factory):
    """An empty virtualenv made once per session; tests copy it rather than create their own."""
    path = tmp_path_factory.mktemp("template") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    return path


@pytest.fixture
def netns_bed(tmp_path):
    """Real SSH hosts in network namespaces (tests/support/netns.py): ``bed = netns_bed(4)``; closed after the test."""
    from ansible_collections.continuum.hydra.tests.support import netns

    with netns.beds(tmp_path) as make:
        yield make

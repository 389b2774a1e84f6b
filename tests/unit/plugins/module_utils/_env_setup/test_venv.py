"""env_setup against real pip: real virtualenvs, real installs of small packages and of torch==2.13.0 (CPU wheel).

Virtualenvs are copied from one made per session (python -m venv takes seconds; a copy a fraction),
torch is installed once per session. A GPU host is a laid-out copy of a recorded sysfs PCI listing
with one NVIDIA function planted from a recorded nvidia-smi file.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._env_setup.plan import EnvSetupError
from ansible_collections.continuum.hydra.plugins.module_utils._env_setup.venv import detect_nvidia_gpu, setup
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

CLOSED_INDEX = "http://127.0.0.1:9/simple"  # a closed loopback port: refused at once
LOCAL_NUMPY = "numpy==2.4.6"


def options(venv, **overrides):
    base = dict(venv=str(venv), python=None, numpy_spec="six==1.16.0", with_torch=False, torch_spec="torch",
                torch_index=None, requirements=None, upgrade=False, base_dir=None, allow_cpu_torch=False,
                pip_timeout=600)
    base.update(overrides)
    return base


def pip(venv, *args):
    out = subprocess.run([os.path.join(str(venv), "bin", "python"), "-m", "pip", "--disable-pip-version-check"] + list(args),
                         check=True, capture_output=True, text=True, timeout=300)
    return out.stdout


def pip_list(venv):
    return json.loads(pip(venv, "list", "--format=json"))


def tree(path):
    """Every file under path with its size and mtime: what 'changes nothing' is checked against."""
    found = {}
    for root, _dirs, files in os.walk(str(path)):
        for name in files:
            full = os.path.join(root, name)
            stat = os.lstat(full)
            found[os.path.relpath(full, str(path))] = (stat.st_size, stat.st_mtime_ns)
    return found


def lay_out_sysfs(root, nvidia_smi_xml=None):
    """A sysfs tree from the recorded listing of a GPU-less KVM host, plus the GPU of a recorded nvidia-smi file."""
    devices = os.path.join(str(root), "bus", "pci", "devices")
    rows = [line.split() for line in read_fixture("sysfs", "kvm-virtio-host-pci.txt").splitlines() if not line.startswith("#")]
    if nvidia_smi_xml:
        xml = read_fixture("nvidia-smi", nvidia_smi_xml)
        bus_id = re.search(r"<pci_bus_id>[0-9A-Fa-f]{4}([0-9A-Fa-f]{4}:[0-9A-Fa-f:.]+)</pci_bus_id>", xml).group(1).lower()
        device_id = re.search(r"<pci_device_id>([0-9A-Fa-f]{4})([0-9A-Fa-f]{4})</pci_device_id>", xml)
        # 0x0302: the "3D controller" class of data-centre GPUs (nvidia-smi does not print it).
        rows.append([bus_id, "0x" + device_id.group(2).lower(), "0x" + device_id.group(1).lower(), "0x030200"])
    for bdf, vendor, device, pci_class in rows:
        os.makedirs(os.path.join(devices, bdf))
        for name, value in (("vendor", vendor), ("device", device), ("class", pci_class)):
            with open(os.path.join(devices, bdf, name), "w") as handle:
                handle.write(value + "\n")
    return str(root)


@pytest.fixture
def venv(template_venv, tmp_path):
    path = tmp_path / "venv"
    shutil.copytree(str(template_venv), str(path), symlinks=True)
    return path


@pytest.fixture(scope="session")
def no_gpu_sysfs(tmp_path_factory):
    return lay_out_sysfs(tmp_path_factory.mktemp("sysfs-plain"))


@pytest.fixture(scope="session")
def gpu_sysfs(tmp_path_factory):
    return lay_out_sysfs(tmp_path_factory.mktemp("sysfs-a100"), "a100-sxm4-v12.xml")


@pytest.fixture(scope="session")
def torch_venv(tmp_path_factory, no_gpu_sysfs):
    """torch==2.13.0 (the CPU wheel on local disk) installed once, by env_setup itself, on a host without GPU."""
    path = tmp_path_factory.mktemp("torch") / "venv"
    result = setup(options(path, numpy_spec=LOCAL_NUMPY, with_torch=True, torch_spec="torch==2.13.0"),
                   sysfs_root=no_gpu_sysfs, search_path="")
    return path, result


def test_gpu_detection_reads_the_pci_tree_and_path(gpu_sysfs, no_gpu_sysfs, tmp_path):
    assert detect_nvidia_gpu(gpu_sysfs, search_path="") == "NVIDIA GPU at PCI 0000:01:00.0"
    assert detect_nvidia_gpu(no_gpu_sysfs, search_path="") is None
    assert detect_nvidia_gpu(str(tmp_path / "no-sysfs"), search_path="") is None
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\n")
    smi.chmod(0o755)
    assert detect_nvidia_gpu(no_gpu_sysfs, search_path=str(smi.parent)) == "nvidia-smi at %s" % smi


def test_check_mode_on_a_missing_venv_creates_nothing_and_lists_the_installs(tmp_path, no_gpu_sysfs):
    venv = tmp_path / "new-venv"
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("six==1.16.0\n")
    result = setup(options(venv, numpy_spec=LOCAL_NUMPY, requirements=str(requirements)), check_mode=True,
                   sysfs_root=no_gpu_sysfs, search_path="")
    assert not venv.exists()
    assert result["changed"] is True and result["venv_created"] is True
    assert result["changes"] == [
        {"name": "numpy", "before": None, "after": "2.4.6", "action": "install"},
        {"name": "six", "before": None, "after": "1.16.0", "action": "install"},
    ]
    assert result["written"] == sorted(result["state_files"].values())
    assert result["manifest"] is None
    assert "--dry-run" in result["pip_commands"][0] and "--ignore-installed" in result["pip_commands"][0]


def test_install_writes_a_manifest_that_matches_pip_freeze_and_a_second_run_changes_nothing(venv, tmp_path, no_gpu_sysfs):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("six==1.16.0\npackaging\n")
    base_dir = tmp_path / "project"
    opts = options(venv, numpy_spec=LOCAL_NUMPY, requirements=str(requirements), base_dir=str(base_dir))

    first = setup(opts, sysfs_root=no_gpu_sysfs, search_path="")
    installed = dict((c["name"].lower(), c["after"]) for c in first["changes"])
    assert first["changed"] is True and first["venv_created"] is False
    assert installed["numpy"] == "2.4.6" and installed["six"] == "1.16.0" and "packaging" in installed
    assert all(c["action"] == "install" for c in first["changes"])

    state = base_dir / ".continuum" / "state"
    assert sorted(os.listdir(str(state))) == ["README.md", "env_manifest.json", "requirements.txt"]
    assert first["written"] == sorted(str(state / name) for name in ("README.md", "env_manifest.json", "requirements.txt"))
    freeze = pip(venv, "freeze").splitlines()
    pinned = [line for line in (state / "requirements.txt").read_text().splitlines() if not line.startswith("#")]
    assert pinned == freeze and "six==1.16.0" in pinned and "numpy==2.4.6" in pinned
    manifest = json.loads((state / "env_manifest.json").read_text())
    assert manifest == first["manifest"]
    listed = sorted(pip_list(venv), key=lambda p: p["name"].lower())
    assert manifest["packages"] == listed
    env = manifest["environment"]
    assert env["venv"] == str(venv) and env["python_executable"] == str(venv / "bin" / "python")
    assert env["python_version"] == "%d.%d.%d" % sys.version_info[:3] and env["torch"] is None and env["nvidia_gpu"] is None
    assert manifest["inputs"]["requirements"] == str(requirements)
    assert "pip install -r %s" % (state / "requirements.txt") in (state / "README.md").read_text()

    before = tree(state)
    second = setup(opts, sysfs_root=no_gpu_sysfs, search_path="")
    assert second["changed"] is False and second["changes"] == [] and second["written"] == []
    assert tree(state) == before
    assert second["manifest"] == manifest  # generated_at kept: the content did not change


def test_check_mode_reports_exactly_the_upgrade_and_changes_nothing(venv, no_gpu_sysfs):
    setup(options(venv), sysfs_root=no_gpu_sysfs, search_path="")
    packages, files = pip_list(venv), tree(venv)

    plan = setup(options(venv, numpy_spec="six", upgrade=True), check_mode=True, sysfs_root=no_gpu_sysfs, search_path="")
    assert plan["changed"] is True
    assert plan["changes"] == [{"name": "six", "before": "1.16.0", "after": "1.17.0", "action": "upgrade"}]
    assert plan["diff"]["before"].count("six==1.16.0") == 1 and "six==1.17.0" in plan["diff"]["after"]
    assert plan["manifest"]["packages"] == sorted(packages, key=lambda p: p["name"].lower())
    assert pip_list(venv) == packages and tree(venv) == files

    applied = setup(options(venv, numpy_spec="six", upgrade=True), sysfs_root=no_gpu_sysfs, search_path="")
    assert applied["changes"] == plan["changes"]
    assert plan["written"] == applied["written"]
    assert setup(options(venv, numpy_spec="six", upgrade=True), check_mode=True,
                 sysfs_root=no_gpu_sysfs, search_path="")["changed"] is False


def test_check_mode_of_an_unchanged_venv_is_not_changed(venv, no_gpu_sysfs):
    setup(options(venv), sysfs_root=no_gpu_sysfs, search_path="")
    result = setup(options(venv), check_mode=True, sysfs_root=no_gpu_sysfs, search_path="")
    assert result["changed"] is False and result["changes"] == [] and result["written"] == []


def _error(opts, **kwargs):
    """The one-line message and the result of a setup that must fail."""
    with pytest.raises(EnvSetupError) as exc:
        setup(opts, **kwargs)
    message = str(exc.value)
    assert "\n" not in message and "Traceback" not in message
    return message, exc.value.result


def _message(opts, **kwargs):
    return _error(opts, **kwargs)[0]


@pytest.mark.parametrize("check_mode", [False, True])
def test_bad_inputs_fail_with_one_line_naming_the_value(venv, tmp_path, no_gpu_sysfs, check_mode):
    before = pip_list(venv)
    kw = dict(check_mode=check_mode, sysfs_root=no_gpu_sysfs, search_path="")
    missing = str(tmp_path / "missing.txt")
    assert _message(options(venv, requirements=missing), **kw) == "requirements %r does not exist or is not a file" % missing
    message = _message(options(venv, numpy_spec="numpy>>=1"), **kw)
    assert message.startswith("numpy_spec 'numpy>>=1' is not a valid requirement")
    message = _message(options(venv, with_torch=True, torch_spec="--index-url=http://x"), **kw)
    assert message.startswith("torch_spec '--index-url=http://x' is not a valid requirement")
    message = _message(options(venv, with_torch=True, torch_spec="torch==2.13.0", torch_index=CLOSED_INDEX), **kw)
    assert message == "torch_index %r is unreachable: [Errno 111] Connection refused" % CLOSED_INDEX
    message = _message(options(venv, python="python-hydra-nonexistent"), **kw)
    assert message.startswith("python 'python-hydra-nonexistent' was not found")
    assert _message(options("relative/venv"), **kw) == "venv 'relative/venv' must be an absolute path"
    assert _message(options(venv, pip_timeout=0), **kw) == "pip_timeout 0 must be a positive number of seconds"

    message, result = _error(options(venv, numpy_spec="hydra-no-such-package-xyz"), **kw)
    assert re.match(r"pip install( --dry-run)? of numpy_spec 'hydra-no-such-package-xyz' failed \(rc=1\): "
                    r"No matching distribution found for hydra-no-such-package-xyz$", message)
    assert result["pip_output"]["rc"] == 1 and "hydra-no-such-package-xyz" in result["pip_output"]["stderr"]
    assert result["changed"] is False
    assert pip_list(venv) == before


def test_a_directory_that_is_not_a_venv_is_refused(tmp_path, no_gpu_sysfs):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "keep.txt").write_text("precious")
    message = _message(options(tmp_path / "data"), sysfs_root=no_gpu_sysfs, search_path="")
    assert message == "venv %r exists but is not a virtualenv (no bin/python): choose another path or empty it" % str(tmp_path / "data")
    assert os.listdir(str(tmp_path / "data")) == ["keep.txt"]


def test_a_pip_timeout_kills_pip_and_names_the_limit(venv, no_gpu_sysfs):
    # Installing torch takes pip well over 3 seconds: the timeout path, for real.
    message, result = _error(options(venv, with_torch=True, torch_spec="torch==2.13.0", pip_timeout=3),
                             sysfs_root=no_gpu_sysfs, search_path="")
    assert message.startswith("pip install of numpy_spec 'six==1.16.0', torch_spec 'torch==2.13.0' did not finish (pip_timeout=3s)")
    assert message.endswith("timed out after 3s")
    assert result["pip_output"]["rc"] is None


def test_torch_install_records_the_cpu_build(torch_venv):
    path, result = torch_venv
    assert result["changed"] is True
    assert result["torch"] == {"version": "2.13.0+cpu", "cuda": None, "build": "cpu"}
    assert result["manifest"]["environment"]["torch"] == result["torch"]
    names = [c["name"].lower() for c in result["changes"]]
    assert "torch" in names and "numpy" in names
    readme = (path / ".continuum" / "state" / "README.md").read_text()
    assert "- torch: 2.13.0+cpu (CPU-only build)" in readme


def test_cpu_only_torch_fails_on_a_gpu_host_unless_allowed(torch_venv, gpu_sysfs):
    path = torch_venv[0]
    opts = options(path, numpy_spec=LOCAL_NUMPY, with_torch=True, torch_spec="torch==2.13.0")
    message, result = _error(opts, sysfs_root=gpu_sysfs, search_path="")
    assert message == ("torch 2.13.0+cpu in %s is a CPU-only build (torch.version.cuda is None) but this host has an NVIDIA GPU "
                       "(NVIDIA GPU at PCI 0000:01:00.0); install a CUDA build (set torch_index to a CUDA wheel index) "
                       "or set allow_cpu_torch=true" % path)
    assert result["changes"] == [] and result["torch"]["build"] == "cpu"
    # The state files record the GPU the host has, so this run rewrote the manifest; a second run is quiet.
    allowed = setup(dict(opts, allow_cpu_torch=True), sysfs_root=gpu_sysfs, search_path="")
    assert allowed["changed"] is False and allowed["torch"]["build"] == "cpu"
    assert allowed["manifest"]["environment"]["nvidia_gpu"] == "NVIDIA GPU at PCI 0000:01:00.0"
    # Check mode judges the installed torch the same way.
    assert _message(opts, check_mode=True, sysfs_root=gpu_sysfs, search_path="").startswith(
        "torch 2.13.0+cpu in %s is a CPU-only build" % path)


def test_check_mode_predicts_a_cpu_torch_from_the_wheel_and_installs_nothing(venv, gpu_sysfs):
    before = pip_list(venv)
    message, result = _error(options(venv, with_torch=True, torch_spec="torch==2.13.0"),
                             check_mode=True, sysfs_root=gpu_sysfs, search_path="")
    assert message.startswith("torch 2.13.0+cpu in %s would be a CPU-only build" % venv)
    assert result["torch"] == {"version": "2.13.0+cpu", "cuda": None, "build": "cpu", "predicted": True}
    assert {"name": "torch", "before": None, "after": "2.13.0+cpu", "action": "install"} in result["changes"]
    assert pip_list(venv) == before


def test_a_torch_index_gets_its_own_last_pip_call(torch_venv, tmp_path, no_gpu_sysfs):
    path = torch_venv[0]
    index = tmp_path / "simple"  # a PEP 503 index with nothing in it: torch is already satisfied
    index.mkdir()
    url = "file://%s" % index
    result = setup(options(path, numpy_spec=LOCAL_NUMPY, with_torch=True, torch_spec="torch==2.13.0", torch_index=url),
                   check_mode=True, sysfs_root=no_gpu_sysfs, search_path="")
    first, second = result["pip_commands"]
    assert "torch==2.13.0" not in first and first[-1] == LOCAL_NUMPY
    assert second[second.index("--index-url") + 1] == url and second[-1] == "torch==2.13.0"
    assert result["changes"] == []
    # The inputs changed (a torch index now), so the state files would be rewritten to say so.
    assert str(path / ".continuum" / "state" / "README.md") in result["written"]

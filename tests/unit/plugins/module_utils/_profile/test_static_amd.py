"""profile's static GPUs on an AMD host: no nvidia-smi, a fake amd-smi replaying recorded MI210 output."""

import json

from ansible_collections.continuum.hydra.plugins.module_utils._host import command as _command
from ansible_collections.continuum.hydra.plugins.module_utils._profile import run as _run
from ansible_collections.continuum.hydra.plugins.module_utils._profile import static as _profile
from ansible_collections.continuum.hydra.tests.support.amd import MI210_STATIC, metric_text

LISTING = json.dumps([{"gpu": 0, "bdf": "0000:83:00.0", "uuid": "8cff73bf-0000-1000-80b6-e1b5b5a08d0f"}])


def amd_host(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for sub, text in (("list", LISTING), ("static", MI210_STATIC), ("metric", metric_text())):
        (tmp_path / ("%s.json" % sub)).write_text(text)
    script = bindir / "amd-smi"
    script.write_text('#!/bin/sh\necho "$*" >> "%s/calls"\ncase "$1 $2" in\n"list --json"|"static --json"|"metric --json") '
                      'exec cat "%s/$1.json";;\nesac\nexit 2\n' % (tmp_path, tmp_path))
    script.chmod(0o755)
    return str(bindir)


def options():
    return {"timeouts": dict(_run.DEFAULT_TIMEOUTS), "nvidia_smi_path": None, "torch_python": None, "expect": {}}


def test_without_nvidia_smi_the_gpus_come_from_amd_smi_and_topology_is_noted(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % amd_host(tmp_path))
    if _command.find_binary("nvidia-smi"):
        import pytest
        pytest.skip("nvidia-smi is installed here")
    notes = []
    gpus, driver, topology = _profile.gpu_profile(dict(options(), root=str(tmp_path)), notes)
    (gpu,) = gpus
    assert (gpu["name"], gpu["sku"], gpu["vendor"], gpu["pci_bus_id"]) == ("AMD Instinct MI210", "mi210", "amd", "0000:83:00.0")
    assert gpu["pcie"]["width_max"] == 16 and gpu["max_clocks"]["sm_mhz"] == 2750
    # In-box amdgpu: no DKMS version; no `nvidia-smi topo -m` on AMD, and the note says why.
    assert driver is None and topology is None
    assert notes == ["GPU topology not read: nvidia-smi topo -m is NVIDIA's, and these GPUs are AMD (amd-smi)"]
    assert sorted((tmp_path / "calls").read_text().split("\n")[:-1]) == ["list --json", "metric --json", "static --json"]


def test_with_no_gpu_tool_at_all_the_note_names_every_tool(tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % (tmp_path / "bin"))
    if _command.find_binary("nvidia-smi") or _command.find_binary("amd-smi") or _command.find_binary("rocm-smi"):
        import pytest
        pytest.skip("a GPU tool is installed here")
    notes = []
    assert _profile.gpu_profile(dict(options(), root=str(tmp_path)), notes) == ([], None, None)
    assert notes == ["GPUs: nvidia-smi not found on PATH (no NVIDIA driver installed?); "
                     "amd-smi and rocm-smi not found on PATH, in $ROCM_PATH/bin or /opt/rocm/bin either"]

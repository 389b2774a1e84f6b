"""ROCm's tools found where ROCm puts them (PATH first, then $ROCM_PATH/bin and /opt/rocm/bin), and what shows a host
has AMD GPUs."""

import os

from ansible_collections.continuum.hydra.plugins.module_utils._host import gpus
from ansible_collections.continuum.hydra.tests.support.amd import MI300X, pci_function


def tool(directory, name):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return str(path)


def test_path_first_then_rocm_path_then_opt_rocm(tmp_path, monkeypatch):
    on_path = tool(tmp_path / "path", "amd-smi")
    in_rocm_path = tool(tmp_path / "rocm-6.2.4" / "bin", "amd-smi")
    in_opt = tool(tmp_path / "opt-rocm" / "bin", "amd-smi")
    monkeypatch.setattr(gpus, "ROCM_DIRS", (str(tmp_path / "opt-rocm"),))
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    environ = {"ROCM_PATH": str(tmp_path / "rocm-6.2.4")}
    assert gpus.find_rocm_tool("amd-smi", environ) == on_path
    os.remove(on_path)
    assert gpus.find_rocm_tool("amd-smi", environ) == in_rocm_path
    assert gpus.find_rocm_tool("amd-smi", {}) == in_opt  # ROCm's packages: /opt/rocm/bin, not linked into /usr/bin


def test_a_file_that_cannot_run_or_is_missing_is_not_found(tmp_path, monkeypatch):
    directory = tmp_path / "opt-rocm" / "bin"
    directory.mkdir(parents=True)
    (directory / "rocm-smi").write_text("not executable\n")
    (directory / "amd-smi").mkdir()  # a directory is not a tool
    monkeypatch.setattr(gpus, "ROCM_DIRS", (str(tmp_path / "opt-rocm"),))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert gpus.find_rocm_tool("rocm-smi", {}) is None and gpus.find_rocm_tool("amd-smi", {}) is None


def test_amd_evidence_names_the_first_sign_of_amd_gpus(tmp_path, monkeypatch):
    # The one AMD detection of the doctor's AMD probes and of NVIDIA-only remediation on an AMD host.
    monkeypatch.setattr(gpus, "ROCM_DIRS", (str(tmp_path / "opt-rocm"),))
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.delenv("ROCM_PATH", raising=False)
    root = tmp_path / "root"
    assert gpus.amd_evidence(str(root)) is None
    pci_function(root, MI300X, "0x1002", "0x120000")  # an MI300X (a processing accelerator), no driver bound
    assert gpus.amd_evidence(str(root)) == "an AMD GPU on the PCI bus"
    (root / "sys/module/amdgpu").mkdir(parents=True)
    assert gpus.amd_evidence(str(root)) == "an AMD GPU on the PCI bus"
    os.remove(str(root / "sys/bus/pci/devices" / MI300X / "class"))  # no class: not a GPU
    assert gpus.amd_evidence(str(root)) == "the amdgpu module loaded"
    on_path = tool(tmp_path / "path", "rocm-smi")
    assert gpus.amd_evidence(str(root)) == "rocm-smi at %s" % on_path

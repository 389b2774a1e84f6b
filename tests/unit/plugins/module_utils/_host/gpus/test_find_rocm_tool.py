"""ROCm's tools found where ROCm puts them: PATH first, then $ROCM_PATH/bin and /opt/rocm/bin."""

import os

from ansible_collections.continuum.hydra.plugins.module_utils._host import gpus


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

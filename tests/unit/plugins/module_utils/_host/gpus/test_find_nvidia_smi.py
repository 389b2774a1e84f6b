"""find_nvidia_smi: the one meaning of nvidia_smi_path (the binary; None: PATH), for doctor, profile and the CLI wrapper."""

import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import nvidia_smi
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi_cli import NvidiaSmiCli


class Failed(Exception):
    pass


class Module:
    def __init__(self, **params):
        self.params = dict({"timeout": 5}, **params)

    def fail_json(self, **result):
        raise Failed(result["msg"])


def fake_smi(directory, body="echo fake"):
    path = os.path.join(str(directory), "nvidia-smi")
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n%s\n" % body)
    os.chmod(path, 0o755)
    return path


def test_override_path_and_path_lookup(tmp_path, monkeypatch):
    binary = fake_smi(tmp_path)
    assert nvidia_smi.find_nvidia_smi(binary) == binary
    monkeypatch.setenv("PATH", str(tmp_path))
    assert nvidia_smi.find_nvidia_smi(None) == binary
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ProbeAbsent, match="not found on PATH"):
        nvidia_smi.find_nvidia_smi()
    with pytest.raises(ProbeError, match="does not exist"):
        nvidia_smi.find_nvidia_smi(str(tmp_path / "missing"))
    with pytest.raises(ProbeError, match="not an executable file"):
        nvidia_smi.find_nvidia_smi(str(tmp_path))  # a directory is not the binary


def test_the_cli_wrapper_reads_the_option_the_same_way(tmp_path, monkeypatch):
    binary = fake_smi(tmp_path, "echo called \"$@\"")
    assert NvidiaSmiCli(Module(nvidia_smi_path=binary)).call(["-L"]) == "called -L\n"
    monkeypatch.setenv("PATH", str(tmp_path))
    assert NvidiaSmiCli(Module(nvidia_smi_path=None)).binary == binary
    with pytest.raises(Failed, match=r"nvidia-smi: not found \(%s\)" % tmp_path):
        NvidiaSmiCli(Module(nvidia_smi_path=str(tmp_path)))


def test_read_gpus_runs_q_x_once_and_names_failures(tmp_path):
    fixture = tmp_path / "smi.xml"
    fixture.write_text("<?xml version=\"1.0\" ?><nvidia_smi_log><driver_version>550.54.15</driver_version>"
                       "<attached_gpus>0</attached_gpus></nvidia_smi_log>")
    binary = fake_smi(tmp_path, "[ \"$1 $2\" = \"-q -x\" ] && cat %s" % fixture)
    data = nvidia_smi.read_gpus(binary, 10)
    assert data["driver_version"] == "550.54.15" and data["gpus"] == []
    broken = fake_smi(tmp_path, "echo 'NVIDIA-SMI has failed' >&2; exit 9")
    with pytest.raises(ProbeError, match="nvidia-smi -q -x exited with rc 9: NVIDIA-SMI has failed"):
        nvidia_smi.read_gpus(broken, 10)

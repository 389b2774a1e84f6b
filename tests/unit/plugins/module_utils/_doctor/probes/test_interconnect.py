"""The interconnect probes on recorded trees and a recorded `nvidia-smi nvlink -e` replayed by a fake nvidia-smi
(a real subprocess: the probe's command, deadline and exit status are the real ones)."""

import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import interconnect
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._status import READ_FAILED
from ansible_collections.continuum.hydra.tests.support import interconnect as ic
from ansible_collections.continuum.hydra.tests.support.amd import pci_function
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path

OPTIONS = ic.OPTIONS


def test_ib_counters_of_the_recorded_tree(tmp_path):
    data = interconnect.probe_ib_counters(OPTIONS, root=str(ic.ib_root(tmp_path, "h")))
    assert len(data["ports"]) == 9 and isinstance(data["read_at"], float)
    with pytest.raises(ProbeAbsent):
        interconnect.probe_ib_counters(OPTIONS, root=str(tmp_path / "bare"))


def test_pcie_aer_reads_the_gpus_nvswitches_and_rdma_nics(tmp_path):
    gpu = pci_function(tmp_path, "0000:3b:00.0", "0x10de", "0x030200", "nvidia")
    pci_function(tmp_path, "0000:3b:00.1", "0x10de", "0x040300")           # the GPU's audio function: not read
    switch = pci_function(tmp_path, "0000:07:00.0", "0x10de", "0x068000")
    nic = pci_function(tmp_path, "0000:9a:00.0", "0x15b3", "0x020700", "mlx5_core")
    os.makedirs(tmp_path / "sys/class/infiniband/mlx5_4")
    os.symlink(nic, tmp_path / "sys/class/infiniband/mlx5_4/device")
    assert interconnect.pcie_functions(str(tmp_path)) == [
        {"address": "0000:07:00.0", "kind": "nvswitch", "name": None}, {"address": "0000:3b:00.0", "kind": "gpu", "name": None},
        {"address": "0000:9a:00.0", "kind": "nic", "name": "mlx5_4"}]
    with pytest.raises(ProbeAbsent, match="no AER statistics on 3 PCI function"):
        interconnect.probe_pcie_aer(OPTIONS, root=str(tmp_path))
    for directory in (gpu, switch):
        for name in ic.AER_FILES:
            with open(fixture_path("procfs", "aer-01.00.0", name)) as src, open(os.path.join(directory, name), "w") as dst:
                dst.write(src.read())
    data = interconnect.probe_pcie_aer(OPTIONS, root=str(tmp_path))
    assert [(d["address"], d["correctable"], d["fatal"]) for d in data["devices"]] == [("0000:07:00.0", 0, 0), ("0000:3b:00.0", 0, 0)]
    assert data["without_aer"] == ["0000:9a:00.0"]
    with pytest.raises(ProbeAbsent, match="no GPU, NVSwitch or RDMA NIC"):
        interconnect.probe_pcie_aer(OPTIONS, root=str(tmp_path / "bare"))


def _fake_smi(tmp_path, body):
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return dict(OPTIONS, nvidia_smi_path=str(path))


def test_nvlink_errors_from_nvidia_smi_when_nvml_does_not_initialise(tmp_path):
    recorded = tmp_path / "nvlink-e.txt"
    recorded.write_text(ic.nvlink_text({(1, "Replay Errors"): 3}))
    options = _fake_smi(tmp_path, 'case "$*" in "nvlink -e") exec cat "%s" ;; esac\nexit 9\n' % recorded)
    data = interconnect.probe_nvlink_errors(options)
    assert data["source"] == "nvidia-smi" and data["gpus"][0]["links"]["1"]["replay_errors"] == 3
    assert data["bad_lines"] == {"count": 0, "sample": []}


def test_nvlink_errors_failures_are_errors_and_no_link_is_absent(tmp_path):
    with pytest.raises(ProbeError, match="rc 9: NVML: driver not loaded"):
        interconnect.probe_nvlink_errors(_fake_smi(tmp_path, "echo 'NVML: driver not loaded' >&2\nexit 9\n"))
    with pytest.raises(ProbeAbsent, match="no GPU on this host reports NVLink error counters"):
        interconnect.probe_nvlink_errors(_fake_smi(tmp_path, "echo 'GPU 0: NVIDIA A10G (UUID: GPU-1)'\n"))
    with pytest.raises(ProbeError, match="no counter read, 1 unreadable line"):
        interconnect.probe_nvlink_errors(_fake_smi(tmp_path, "echo 'Link 0: Replay Errors: 4'\n"))
    failed = {"nvidia_smi": {"status": READ_FAILED, "reason": "nvidia-smi timed out after 30s"}}
    with pytest.raises(ProbeError, match="not read: nvidia-smi failed earlier in this run"):
        interconnect.probe_nvlink_errors(dict(OPTIONS, envelopes=failed))

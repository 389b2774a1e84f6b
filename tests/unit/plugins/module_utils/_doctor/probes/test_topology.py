"""The topology probe run for real: recorded `nvidia-smi topo -m` / `rocm-smi --showtopo` replayed by small
executables, and a /sys tree laid out under tmp_path."""

import os
import shlex

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import topology as probe
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._status import READ_FAILED
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path

TIMEOUTS = {"nvidia_smi": 10, "command": 10}


def tool(directory, name, stdout_file=None, rc=0, expect_args=None):
    """A replaying executable: prints the recording when called with expect_args, else fails."""
    path = os.path.join(str(directory), name)
    body = ['if [ "$*" != %s ]; then echo "unexpected args: $*" >&2; exit 9; fi' % shlex.quote(expect_args or "")]
    if stdout_file:
        body.append("/bin/cat %s" % shlex.quote(stdout_file))
    body.append("exit %d" % rc)
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + "\n".join(body) + "\n")
    os.chmod(path, 0o755)
    return path


def lay_out_sys(root):
    for bus, node in (("1b", "0"), ("43", "0")):
        gpu = root / ("sys/bus/pci/devices/0000:%s:00.0" % bus)
        gpu.mkdir(parents=True)
        for name, value in (("vendor", "0x10de"), ("class", "0x030200"), ("device", "0x2330"), ("numa_node", node),
                            ("local_cpulist", "0-55,112-167")):
            (gpu / name).write_text(value + "\n")
    nic = root / "sys/bus/pci/devices/0000:1a:00.0"
    nic.mkdir(parents=True)
    (nic / "numa_node").write_text("0\n")
    (root / "sys/class/infiniband/mlx5_0").mkdir(parents=True)
    (root / "sys/class/infiniband/mlx5_0/device").symlink_to(nic)
    for cpu, package in ((0, "0"), (1, "1")):
        (root / ("sys/devices/system/cpu/cpu%d/topology" % cpu)).mkdir(parents=True)
        (root / ("sys/devices/system/cpu/cpu%d/topology/physical_package_id" % cpu)).write_text(package + "\n")
    for node, cpus in ((0, "0"), (1, "1")):
        (root / ("sys/devices/system/node/node%d" % node)).mkdir(parents=True)
        (root / ("sys/devices/system/node/node%d/cpulist" % node)).write_text(cpus + "\n")
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/status").write_text("Name:\tpython\nCpus_allowed_list:\t0-55\n")
    return root


def test_nvidia_smi_topo_once_plus_sys_facts(tmp_path):
    smi = tool(tmp_path, "nvidia-smi", fixture_path("nvidia-smi-topo", "dgx-h100-nv18-12nic-driver580-truncated.txt"),
               expect_args="topo -m")
    data = probe.probe_topology({"timeouts": TIMEOUTS, "nvidia_smi_path": smi}, root=str(lay_out_sys(tmp_path / "root")))
    assert data["topology"]["source"] == "nvidia-smi" and len(data["topology"]["gpus"]) == 8
    facts = data["sys"]
    assert facts["gpus"]["0000:43:00.0"]["local_cpulist"] == "0-55,112-167"
    assert facts["nics"]["mlx5_0"] == {"numa_node": 0, "numa_node_raw": "0", "local_cpulist": None, "address": "0000:1a:00.0"}
    assert (facts["sockets"], facts["numa_nodes"], facts["bound_cpus"]) == (2, 2, "0-55")


def test_failing_or_empty_nvidia_smi_is_an_error_naming_it(tmp_path):
    smi = tool(tmp_path, "nvidia-smi", rc=3, expect_args="topo -m")
    with pytest.raises(ProbeError, match=r"topo -m exited with rc 3"):
        probe.probe_topology({"timeouts": TIMEOUTS, "nvidia_smi_path": smi}, root=str(tmp_path))
    empty = tool(tmp_path, "nvidia-smi2", expect_args="topo -m")
    with pytest.raises(ProbeError, match=r"printed no topology matrix"):
        probe.probe_topology({"timeouts": TIMEOUTS, "nvidia_smi_path": empty}, root=str(tmp_path))
    failed = {"nvidia_smi": {"status": READ_FAILED, "reason": "hung"}}
    with pytest.raises(ProbeError, match=r"nvidia-smi failed \(hung\); topo -m not run"):
        probe.probe_topology({"timeouts": TIMEOUTS, "nvidia_smi_path": smi, "envelopes": failed}, root=str(tmp_path))


def test_rocm_smi_is_read_where_nvidia_smi_is_absent(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool(bin_dir, "rocm-smi", fixture_path("rocm-smi-topo", "mi300x-8gpu-xgmi-rocm72.txt"), expect_args="--showtopo")
    monkeypatch.setenv("PATH", str(bin_dir))
    data = probe.probe_topology({"timeouts": TIMEOUTS, "nvidia_smi_path": None}, root=str(tmp_path))
    assert data["topology"]["source"] == "rocm-smi" and data["topology"]["links"]["GPU0"]["GPU7"] == "XGMI"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ProbeAbsent, match="neither nvidia-smi nor rocm-smi"):
        probe.probe_topology({"timeouts": TIMEOUTS, "nvidia_smi_path": None}, root=str(tmp_path))

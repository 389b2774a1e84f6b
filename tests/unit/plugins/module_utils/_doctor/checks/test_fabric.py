"""The NVLink and Fabric Manager checks on recorded nvidia-smi nvlink output and Fabric Manager logs."""

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import xid
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvlink_status
from ansible_collections.continuum.hydra.tests.support.envelopes import ok
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture
from ansible_collections.continuum.hydra.tests.support.nvidia import A100_UUID, judge, named, recorded, smi


def nvlink(text):
    return ok({"source": "nvidia-smi", "gpus": parse_nvlink_status(text)})


def test_nvlink_links_up_down_and_partial():
    status = read_fixture("nvidia-smi-nvlink", "a100-sxm4-40gb-status.txt")
    assert judge("gpu.nvlink", smi("a100-sxm4-v12.xml"), nvlink=nvlink(status))["status"] == "PASS"
    partial = judge("gpu.nvlink", smi("a100-sxm4-v12.xml"), nvlink=nvlink(status.replace("Link 7: 25 GB/s", "Link 7: <inactive>")))
    assert partial["status"] == "FAIL" and "1 of 12 links inactive (7)" in partial["message"]
    assert named(partial) == [(0, A100_UUID)]
    all_down = status.replace("25 GB/s", "<inactive>")
    assert judge("gpu.nvlink", smi("a100-sxm4-v12.xml"), nvlink=nvlink(all_down))["status"] == "FAIL"  # an SXM GPU
    pcie = all_down.replace("A100-SXM4-40GB", "A100-PCIE-40GB")
    assert judge("gpu.nvlink", smi("a10g.xml"), nvlink=nvlink(pcie))["status"] == "WARN"
    slower = judge("gpu.nvlink", smi("a100-sxm4-v12.xml"), nvlink=nvlink(status.replace("Link 3: 25 GB/s", "Link 3: 12.5 GB/s")))
    assert slower["status"] == "WARN" and "12.5, 25 GB/s" in slower["message"]
    assert judge("gpu.nvlink", smi("a100-sxm4-v12.xml"))["status"] == "SKIP"


def fabric(state):
    return ok({"nvswitches": ["0000:c3:00.0"], "service": "nvidia-fabricmanager", "active_state": state})


def test_fabric_manager_on_nvswitch_hosts():
    assert judge("gpu.fabric_manager", smi("a100-sxm4-v12.xml"), fabric_manager=fabric("active"))["status"] == "PASS"
    inactive = judge("gpu.fabric_manager", smi("a100-sxm4-v12.xml"), fabric_manager=fabric("inactive"))
    assert inactive["status"] == "FAIL" and "nvidia-fabricmanager is inactive" in inactive["message"]
    training = smi("a100-sxm4-v12.xml", ("fabric/state", "In Progress"), ("fabric/status", "N/A"))
    record = judge("gpu.fabric_manager", training, fabric_manager=fabric("active"))
    assert record["status"] == "FAIL" and "state In Progress" in record["message"]
    assert judge("gpu.fabric_manager", smi("a100-sxm4-v12.xml"), fabric_manager=fabric(None))["status"] == "WARN"
    # The status is NVML's result of the fabric probe: an error string there is a failed registration, not a
    # value that could not be read (NVIDIA/NVSentinel#883: Unknown Error on some GPUs of a node)
    refused = smi("a100-sxm4-v12.xml", ("fabric/state", "Completed"), ("fabric/status", "Insufficient Resources"))
    record = judge("gpu.fabric_manager", refused, fabric_manager=fabric("active"))
    assert record["status"] == "FAIL" and "status Insufficient Resources" in record["message"]
    done = smi("a100-sxm4-v12.xml", ("fabric/state", "Completed"), ("fabric/status", "Success"))
    assert judge("gpu.fabric_manager", done, fabric_manager=fabric(None))["status"] == "PASS"
    assert judge("gpu.fabric_manager", smi("a100-sxm4-v12.xml"))["status"] == "SKIP"


def fabric_with_log(text):
    return ok({"nvswitches": ["0000:86:00.0"], "service": "nvidia-fabricmanager", "active_state": "active",
               "log": dict(xid.scan_fabric_manager_log(text), path="/var/log/fabricmanager.log", status="ok", reason=None)})


def test_fabric_manager_log_errors_grade_the_fabric_manager_check():
    healthy = read_fixture("kernel-log", "fabricmanager-gpud.log")
    assert judge("gpu.fabric_manager", smi("a100-sxm4-v12.xml"), fabric_manager=fabric_with_log(healthy))["status"] == "PASS"
    non_fatal, fatal = recorded("fabricmanager-error-lines.txt")
    warn = judge("gpu.fabric_manager", smi("a100-sxm4-v12.xml"), fabric_manager=fabric_with_log(healthy + non_fatal))
    assert warn["status"] == "WARN" and "non-fatal error 12028 x1 on NVSwitch 00000000:86:00.0" in warn["message"]
    fail = judge("gpu.fabric_manager", smi("a100-sxm4-v12.xml"), fabric_manager=fabric_with_log(healthy + fatal))
    assert fail["status"] == "FAIL" and "fatal error 20034 x1 on NVSwitch 00000000:86:00.0" in fail["message"]
    assert "Reboot the node" in fail["remediation"]
    other = healthy + non_fatal.replace("detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci bus id "
                                        "00000000:86:00.0 physical id 3 port 61", "request to query NVSwitch device failed")
    record = judge("gpu.fabric_manager", smi("a100-sxm4-v12.xml"), fabric_manager=fabric_with_log(other))
    assert record["status"] == "WARN" and "1 [ERROR] entry" in record["message"]

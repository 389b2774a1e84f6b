"""One playbooks/doctor.yml run over a mixed fleet: AMD hosts (fake amd-smi replaying a recorded MI210) and NVIDIA
hosts (fake nvidia-smi replaying a recorded A100). The fleet report must hold two hardware classes, each with its
own hosts and its vendor, drift judged within each class only (amdgpu driver and VBIOS among the AMD hosts), and
vendor-correct remediation.
"""

import copy
import glob
import json
import os

import pytest

from ansible_collections.continuum.hydra.tests.support.amd import MI210_STATIC, amd_smi_host, with_ecc
from ansible_collections.continuum.hydra.tests.support.fleet import MACHINE_BOUND, fixture, host_vars, run_playbook, write_host_bin

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(glob.glob("/sys/class/kfd/kfd/topology/nodes/*")) or os.path.exists("/dev/kfd"),
                       reason="reads this host's /sys: needs a host without an AMD GPU"),
]


def mi210_static(vbios, driver):
    """The recorded MI210 static document with a VBIOS version and a DKMS amdgpu version planted."""
    doc = json.loads(MI210_STATIC)
    gpu = doc["gpu_data"][0]
    gpu["vbios"] = dict(gpu["vbios"], version=vbios)
    gpu["driver"] = dict(gpu["driver"], version=driver)
    return json.dumps(doc)


def amd_host(root, host, vbios="113-D67301-063", driver="6.10.5", metric=None):
    bindir = amd_smi_host(root, host, metric or with_ecc())
    with open(os.path.join(root, host, "amd-smi-static.json"), "w") as handle:
        handle.write(mi210_static(vbios, driver))
    return bindir


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("mixed-fleet"))
    a100 = fixture("a100-sxm4-v12.xml")
    hosts = {
        "mi210-a": host_vars(amd_host(root, "mi210-a")),
        "mi210-b": host_vars(amd_host(root, "mi210-b", driver="6.8.5")),
        "mi210-c": host_vars(amd_host(root, "mi210-c", vbios="113-D67301-059",
                                      metric=with_ecc(uncorrectable=3, umc_uncorrectable=3))),
        "a100-a": host_vars(write_host_bin(root, "a100-a", xml=a100)),
        "a100-b": host_vars(write_host_bin(root, "a100-b", xml=copy.copy(a100))),
    }
    report_dir = os.path.join(root, "reports")
    os.makedirs(report_dir)
    proc, found = run_playbook({"all": {"hosts": hosts}}, report_dir, extra_vars={
        "hydra_only": ["gpu", "driver"], "hydra_exclude": MACHINE_BOUND})
    assert found is not None, "no fleet report written:\n%s\n%s" % (proc.stdout[-4000:], proc.stderr[-4000:])
    return found


def test_one_report_two_hardware_classes_each_with_its_hosts_and_vendor(report):
    classes = dict((name, info) for name, info in report["analysis"]["classes"].items() if info["basis"] == "hardware")
    assert len(classes) == 2, sorted(classes)
    by_vendor = dict((info["gpu_vendor"], (name, info)) for name, info in classes.items())
    amd_name, amd = by_vendor["amd"]
    nvidia_name, nvidia = by_vendor["nvidia"]
    assert amd_name.startswith("1x AMD Instinct MI210 | ") and amd["hosts"] == ["mi210-a", "mi210-b", "mi210-c"]
    assert nvidia_name.startswith("1x NVIDIA A100-SXM4-80GB | ") and nvidia["hosts"] == ["a100-a", "a100-b"]
    for host in ("mi210-a", "mi210-b", "mi210-c"):
        assert report["hosts"][host]["class"] == amd_name
        assert report["hosts"][host]["doctor"]["environment"]["gpu_vendor"] == "amd"
    assert report["hosts"]["a100-a"]["class"] == nvidia_name
    assert "gpu_vendor" not in report["hosts"]["a100-a"]["doctor"]["environment"]


def test_drift_is_judged_within_the_amd_class_on_amdgpu_and_vbios(report):
    items = sorted((i["host"], i["field"], i["value"], i["reference"]) for i in report["analysis"]["drift"]["items"])
    assert items == [("mi210-b", "driver_version", "6.8.5", "6.10.5"),
                     ("mi210-c", "vbios_version", "113-D67301-059", "113-D67301-063")]


def test_an_amd_ecc_failure_in_the_fleet_report_names_amd_smi(report):
    ecc = dict((c["id"], c) for c in report["hosts"]["mi210-c"]["doctor"]["checks"])["gpu.ecc_errors"]
    assert ecc["status"] == "FAIL" and "amd-smi reset --gpureset --gpu <index>" in ecc["remediation"]
    assert "nvidia-smi" not in ecc["remediation"]

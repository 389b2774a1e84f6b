"""A real ansible-playbook run of playbooks/doctor.yml on local-connection AMD hosts.

Each host has fake amd-smi or rocm-smi scripts replaying recorded output (tests/fixtures/amd/README.md), fake
journalctl/dmesg replaying a recorded kernel log, and no nvidia-smi. The module, the probes, the checks and the
report are real; the hosts' /sys is this machine's (no AMD GPU here, so PCI and KFD add nothing).
"""

import glob
import os

import pytest

from ansible_collections.continuum.hydra.tests.support.amd import amd_smi_host, metric_text, tool, with_ecc
from ansible_collections.continuum.hydra.tests.support.fleet import host_vars, run_playbook, write_host_bin
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path, read_fixture

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(bool(glob.glob("/sys/class/kfd/kfd/topology/nodes/*")) or os.path.exists("/dev/kfd"),
                       reason="reads this host's /sys: needs a host without an AMD GPU"),
]

JUDGED = ("gpu.count", "gpu.model", "gpu.temperature", "gpu.power", "gpu.pcie_link")


def rocm_smi_host(root, host, recording):
    bindir = write_host_bin(root, host)
    tool(bindir, "rocm-smi", '[ "$*" = "--showallinfo --json" ] || exit 2\nexec cat "%s"\n' % fixture_path("amd", "rocm-smi", recording))
    return bindir


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("amd-fleet"))
    hosts = {
        "mi210-amd-smi": host_vars(amd_smi_host(root, "mi210-amd-smi", metric_text(wrapped=True)),
                                   hydra_expect={"gpu_count": 1, "gpu_model": "MI210"}),
        "mi210-ecc": host_vars(amd_smi_host(root, "mi210-ecc", with_ecc(uncorrectable=3, umc_uncorrectable=3))),
        "mi210-failed-reset": host_vars(amd_smi_host(
            root, "mi210-failed-reset", metric_text(),
            kernel_log=read_fixture("amd", "kernel-log", "rocm-1886-dmesg-ctime-mi50-athub-ue-reset-smu-fail.log"))),
        "mi100-rocm-smi": host_vars(rocm_smi_host(root, "mi100-rocm-smi", "telegraf-mi100_rocm602.json"),
                                    hydra_expect={"gpu_count": 4, "gpu_model": "MI100"}),
        "mi250-rocm-smi": host_vars(rocm_smi_host(root, "mi250-rocm-smi", "wandb-mi250-oam-gcd-drv624-rocm6.json")),
        "amd-smi-garbage": host_vars(tool_host(root, "amd-smi-garbage", "amd-smi", "echo 'Traceback (most recent call last):'\n")),
    }
    report_dir = os.path.join(root, "reports")
    os.makedirs(report_dir)
    proc, report = run_playbook({"all": {"hosts": hosts}}, report_dir, extra_vars={
        "hydra_only": ["gpu", "driver"],
        # gpu.topology reads `rocm-smi --showtopo`, which these recordings do not have.
        "hydra_exclude": ["gpu.nvml_available", "gpu.nvml_devices", "gpu.topology"]})
    assert report is not None, "no fleet report written:\n%s\n%s" % (proc.stdout[-4000:], proc.stderr[-4000:])
    return report


def tool_host(root, host, name, body):
    bindir = write_host_bin(root, host)
    tool(bindir, name, body)
    return bindir


def checks(report, host):
    return dict((c["id"], c) for c in report["hosts"][host]["doctor"]["checks"])


@pytest.mark.parametrize("host", ["mi210-amd-smi", "mi100-rocm-smi", "mi250-rocm-smi"])
def test_healthy_recordings_are_judged_with_no_error_and_no_fail(fleet, host):
    found = checks(fleet, host)
    bad = dict((cid, (c["status"], c["message"])) for cid, c in found.items() if c["status"] in ("FAIL", "ERROR"))
    assert bad == {}, host
    for check_id in JUDGED:
        assert found[check_id]["status"] in ("PASS", "WARN"), (host, check_id, found[check_id]["message"])
    assert found["driver.amd_smi"]["status"] == "PASS"
    assert fleet["hosts"][host]["doctor"]["probes"]["nvidia_smi"]["status"] == "absent"


def test_expectations_are_met_by_the_recordings(fleet):
    mi210, mi100 = checks(fleet, "mi210-amd-smi"), checks(fleet, "mi100-rocm-smi")
    assert mi210["gpu.count"]["status"] == "PASS" and mi210["gpu.model"]["message"] == "all 1 GPUs are MI210"
    assert mi100["gpu.count"]["message"] == "4 AMD GPUs, as expected"
    # The idle MI210 runs its x16 link at x8: re-check under load, never a FAIL at idle.
    assert mi210["gpu.pcie_link"]["status"] == "WARN"


def test_a_planted_uncorrectable_ecc_count_fails(fleet):
    found = checks(fleet, "mi210-ecc")
    assert found["gpu.ecc_errors"]["status"] == "FAIL" and "volatile DRAM 3" in found["gpu.ecc_errors"]["message"]
    assert fleet["hosts"]["mi210-ecc"]["failing_checks"] == ["gpu.ecc_errors"]


def test_a_failed_reset_in_the_kernel_log_fails(fleet):
    found = checks(fleet, "mi210-failed-reset")
    assert found["gpu.amdgpu_errors"]["status"] == "FAIL"
    assert "GPU reset failed" in found["gpu.amdgpu_errors"]["message"]


def test_amd_smi_garbage_is_one_error_and_never_healthy(fleet):
    found = checks(fleet, "amd-smi-garbage")
    assert found["driver.amd_smi"]["status"] == "ERROR" and "unreadable JSON" in found["driver.amd_smi"]["message"]
    for check_id in JUDGED:
        assert found[check_id]["status"] == "SKIP" and found[check_id]["blocked_by"] == "driver.amd_smi", check_id
    assert fleet["hosts"]["amd-smi-garbage"]["status"] == "error"

"""A real ansible-playbook run of playbooks/doctor.yml over a simulated heterogeneous fleet.

Each host replays a different real recording (faults planted by editing copies), and the test
asserts exactly what the fleet report says about each host.
"""

import json
import os
import re

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.tests.support.fleet import (
    GPU_ONLY,
    MACHINE_BOUND,
    PERSISTENCE_ON,
    UNCORRECTABLE_ECC,
    fixture,
    host_uuid,
    host_vars,
    plant,
    run_playbook,
    write_host_bin,
)

pytestmark = pytest.mark.integration


def _t4_bus_id():
    return re.search(r"<pci_bus_id>([^<]+)</pci_bus_id>", fixture("tesla-t4.xml")).group(1)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("fleet"))
    a100 = fixture("a100-sxm4-v12.xml")
    t4 = fixture("tesla-t4.xml")
    t4_bus = _t4_bus_id()
    # NVRM names the GPU as domain:bus:device (4-digit domain, no function): 00000000:00:1E.0 -> 0000:00:1e.
    xid_pci = t4_bus.lower()[4:].rsplit(".", 1)[0]
    xid_line = "2026-11-22T10:00:00+0000 node kernel: NVRM: Xid (PCI:%s): 79, pid=2203, GPU has fallen off the bus.\n" % xid_pci
    hosts = {
        "a100-ok-1": host_vars(write_host_bin(root, "a100-ok-1", plant(a100, PERSISTENCE_ON))),
        "a100-ok-2": host_vars(write_host_bin(root, "a100-ok-2", plant(a100, PERSISTENCE_ON))),
        "a100-ecc": host_vars(write_host_bin(root, "a100-ecc", plant(
            a100, PERSISTENCE_ON, UNCORRECTABLE_ECC))),
        "a100-missing-gpus": host_vars(write_host_bin(root, "a100-missing-gpus", plant(a100, PERSISTENCE_ON)),
                                       hydra_expect={"gpu_count": 8}),
        "a100-persistence-off": host_vars(write_host_bin(root, "a100-persistence-off", a100)),
        "t4-narrow-busy": host_vars(write_host_bin(root, "t4-narrow-busy", plant(
            t4, PERSISTENCE_ON, (r"<gpu_util>0 %</gpu_util>", "<gpu_util>97 %</gpu_util>", 1)))),
        "t4-xid": host_vars(write_host_bin(root, "t4-xid", plant(t4, PERSISTENCE_ON), kernel_log=xid_line),
                            hydra_expect={"pcie_width": 8}),
        "cpu-only": host_vars(write_host_bin(root, "cpu-only")),
        "smi-hangs": host_vars(write_host_bin(root, "smi-hangs", hang=True), hydra_timeouts={"nvidia_smi": 2}),
        "no-python": host_vars(write_host_bin(root, "no-python"), ansible_python_interpreter="/nonexistent/bin/python3"),
        # Nothing listens on port 1 of the loopback address: the connection is refused at once.
        "unreachable": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1,
                        "ansible_ssh_common_args": "-o ConnectTimeout=5 -o StrictHostKeyChecking=no"},
    }
    report_dir = os.path.join(root, "reports")
    os.makedirs(report_dir)
    proc, report = run_playbook({"all": {"hosts": hosts}}, report_dir,
                                extra_vars={"hydra_only": GPU_ONLY, "hydra_exclude": MACHINE_BOUND})
    assert report is not None, "no fleet report written:\n%s\n%s" % (proc.stdout[-4000:], proc.stderr[-4000:])
    return {"proc": proc, "report": report, "report_dir": report_dir}


def _status(report, host, check_id):
    for chk in report["hosts"][host]["doctor"]["checks"]:
        if chk["id"] == check_id:
            return chk
    raise AssertionError("%s has no %s" % (host, check_id))


def test_every_host_has_exactly_its_verdict(fleet):
    statuses = dict((h, e["status"]) for h, e in fleet["report"]["hosts"].items())
    assert statuses == {
        "a100-ok-1": "healthy",
        "a100-ok-2": "healthy",
        "a100-ecc": "failed",
        "a100-missing-gpus": "failed",
        "a100-persistence-off": "warning",
        "t4-narrow-busy": "failed",
        "t4-xid": "failed",
        "cpu-only": "healthy",
        "smi-hangs": "error",
        "no-python": "task_failed",
        "unreachable": "unreachable",
    }
    assert fleet["report"]["totals"] == {"hosts": 11, "healthy": 3, "warning": 1, "failed": 4, "error": 1,
                                         "unreachable": 1, "task_failed": 1}


def test_failing_checks_name_the_hosts_and_gpus(fleet):
    report = fleet["report"]
    assert report["hosts"]["a100-ecc"]["failing_checks"] == ["gpu.ecc_errors"]
    assert report["hosts"]["a100-missing-gpus"]["failing_checks"] == ["gpu.count"]
    assert report["hosts"]["t4-narrow-busy"]["failing_checks"] == ["gpu.pcie_link"]
    assert report["hosts"]["t4-xid"]["failing_checks"] == ["gpu.xid_errors"]
    ecc = [e for e in report["failing"]["gpu.ecc_errors"] if e["status"] == "FAIL"]
    assert [e["host"] for e in ecc] == ["a100-ecc"]
    assert ecc[0]["gpus"][0]["uuid"] == host_uuid("GPU-513536b6-7d19-9063-b049-1e69664bb298", "a100-ecc")
    assert ecc[0]["gpus"][0]["pci_bus_id"] == "00000000:01:00.0"
    xid = [e for e in report["failing"]["gpu.xid_errors"] if e["status"] == "FAIL"]
    assert [e["host"] for e in xid] == ["t4-xid"] and xid[0]["gpus"][0]["pci_bus_id"] == _t4_bus_id()


def test_warnings_and_skips_are_not_failures(fleet):
    report = fleet["report"]
    assert report["hosts"]["a100-persistence-off"]["warning_checks"] == ["gpu.persistence_mode"]
    assert report["hosts"]["a100-persistence-off"]["failing_checks"] == []
    cpu = report["hosts"]["cpu-only"]["doctor"]
    assert cpu["summary"]["PASS"] == 0 and cpu["summary"]["SKIP"] == len(cpu["checks"]) > 0
    assert cpu["probes"]["nvidia_smi"]["status"] == "absent"


def test_a_hanging_nvidia_smi_is_an_error_never_a_pass(fleet):
    doctor = fleet["report"]["hosts"]["smi-hangs"]["doctor"]
    assert doctor["probes"]["nvidia_smi"]["status"] == "error"
    assert "timed out after 2s" in doctor["probes"]["nvidia_smi"]["reason"]
    # driver.nvidia_smi is the root cause (ERROR); every check that needs nvidia-smi is blocked by it (SKIP naming
    # it), never PASS; only the XID check, which reads the kernel log, can pass.
    needs_smi = set(c.id for c in CATALOGUE if "nvidia_smi" in c.requires)
    statuses = dict((c["id"], c["status"]) for c in doctor["checks"])
    blocked_by = dict((c["id"], c.get("blocked_by")) for c in doctor["checks"])
    assert statuses["driver.nvidia_smi"] == "ERROR"
    assert needs_smi & set(statuses) and all(statuses[i] == "SKIP" and blocked_by[i] == "driver.nvidia_smi"
                                             for i in needs_smi & set(statuses))
    assert [i for i, status in statuses.items() if status == "PASS"] == ["gpu.xid_errors"]
    assert _status(fleet["report"], "smi-hangs", "gpu.ecc_errors")["status"] == "SKIP"
    entry = fleet["report"]["hosts"]["smi-hangs"]
    assert entry["status"] == "error" and entry["failing_checks"] == ["driver.nvidia_smi"]
    assert [(r["check_id"], r["blocked"]) for r in entry["roots"]] == [
        ("driver.nvidia_smi", len([i for i in blocked_by if blocked_by[i] == "driver.nvidia_smi"]))]
    assert [(a["check_id"], a["status"]) for a in fleet["report"]["actions"] if "smi-hangs" in a["hosts"]] == [
        ("driver.nvidia_smi", "ERROR")]


def test_hosts_that_never_ran_doctor_are_in_the_report_with_the_reason(fleet):
    hosts = fleet["report"]["hosts"]
    assert hosts["unreachable"]["doctor"] is None and hosts["unreachable"]["message"]
    assert hosts["no-python"]["doctor"] is None and "/nonexistent/bin/python3" in hosts["no-python"]["message"]


def test_actions_are_ranked_by_severity_then_hosts_affected(fleet):
    actions = fleet["report"]["actions"]
    fails = [a for a in actions if a["status"] == "FAIL"]
    assert [a["check_id"] for a in fails] == sorted(a["check_id"] for a in fails)  # one host each: by id
    assert actions.index(fails[-1]) < min(i for i, a in enumerate(actions) if a["status"] != "FAIL")
    assert all(a["remediation"] for a in fails)
    # One action per (check, status): the WARN host only; the hung host's check is blocked by driver.nvidia_smi.
    persistence = [(a["status"], a["hosts"]) for a in actions if a["check_id"] == "gpu.persistence_mode"]
    assert persistence == [("WARN", ["a100-persistence-off"])]


def test_terminal_summary_and_report_files(fleet):
    out = fleet["proc"].stdout
    assert "continuum.hydra fleet report: 11 hosts: 3 healthy, 1 warning, 4 failed, 1 error, 1 unreachable, 1 task failed" in out
    assert "FAIL  gpu.ecc_errors" in out and "a100-ecc (GPU 0 00000000:01:00.0 GPU-" in out
    files = sorted(os.listdir(fleet["report_dir"]))
    stamped = [f for f in files if f.startswith("fleet-report-") and f.endswith(".json")]
    assert "fleet-report.json" in files and len(stamped) == 1
    with open(os.path.join(fleet["report_dir"], stamped[0])) as handle:
        assert json.load(handle) == fleet["report"]
    assert not [f for f in files if f.endswith(".tmp")]
    # The default fail_on=never: failing hosts do not fail the play, unreachable/broken ones do.
    assert fleet["proc"].returncode == 4


def test_a_failure_in_a_play_that_checks_no_host_is_not_a_host_verdict(tmp_path):
    """A controller play after the doctor play (as validate_partition.yml has) fails: the report ignores it."""
    bindir = write_host_bin(str(tmp_path), "node", plant(fixture("a100-sxm4-v12.xml"), PERSISTENCE_ON))
    playbook = tmp_path / "two-plays.yml"
    playbook.write_text(
        "- hosts: node\n  gather_facts: false\n  environment: '{{ hydra_environment }}'\n  tasks:\n"
        "    - continuum.hydra.doctor:\n        only: [gpu.ecc_errors]\n"
        "    - continuum.hydra.doctor:\n        list_checks: true\n"
        "- hosts: controller\n  gather_facts: false\n  tasks:\n    - ansible.builtin.fail:\n        msg: brake tripped\n")
    inventory = {"all": {"hosts": {"node": host_vars(bindir), "controller": host_vars(bindir)}}}
    report_dir = tmp_path / "reports"
    report_dir.mkdir()
    proc, report = run_playbook(inventory, str(report_dir), playbook=str(playbook))
    assert "brake tripped" in proc.stdout
    assert list(report["hosts"]) == ["node"] and report["hosts"]["node"]["status"] == "healthy"
    assert [c["id"] for c in report["hosts"]["node"]["doctor"]["checks"]] == ["gpu.ecc_errors"]

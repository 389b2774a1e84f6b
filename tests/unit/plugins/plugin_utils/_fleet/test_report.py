"""Fleet report aggregation and the terminal summary, on synthetic host results."""

from ansible_collections.continuum.hydra.plugins.module_utils._results import gpu_ref
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import fabric
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import terminal
from ansible_collections.continuum.hydra.tests.support.fabric import SimulatedFabric, isolate

GPU0 = {"index": 0, "pci_bus_id": "00000000:01:00.0", "uuid": "GPU-aaa", "name": "NVIDIA A100-SXM4-80GB"}


def _check(check_id, status, remediation=None, gpus=None):
    return {"id": check_id, "status": status, "message": "%s is %s" % (check_id, status),
            "details": {"gpus": gpus} if gpus else {}, "remediation": remediation}


def _doctor(*checks):
    return {"schema_version": "1.1.0", "checks": list(checks), "summary": {}, "overall_status": "ignored"}


def _fleet():
    c = FleetCollector()
    c.add_doctor("ok-1", _doctor(_check("gpu.ecc_errors", "PASS"), _check("gpu.persistence_mode", "PASS")))
    c.add_doctor("ecc", _doctor(_check("gpu.ecc_errors", "FAIL", "drain and reset", [gpu_ref(GPU0)]),
                                _check("gpu.persistence_mode", "WARN", "nvidia-smi -pm 1")))
    c.add_doctor("warn-1", _doctor(_check("gpu.ecc_errors", "PASS"), _check("gpu.persistence_mode", "WARN", "nvidia-smi -pm 1")))
    c.add_doctor("warn-2", _doctor(_check("gpu.ecc_errors", "SKIP"), _check("gpu.persistence_mode", "WARN", "enable persistenced")))
    c.add_doctor("err", _doctor(_check("gpu.ecc_errors", "ERROR", "fix nvidia-smi"), _check("gpu.persistence_mode", "ERROR")))
    c.add_unreachable("gone", "Failed to connect to the host via ssh: Connection refused")
    c.add_task_failed("broken", "Check host health: MODULE FAILURE")
    return c.build("2026-11-22T13:00:00+00:00", "doctor.yml")


def test_host_statuses_come_from_the_checks_not_the_summary():
    report = _fleet()
    assert dict((h, e["status"]) for h, e in report["hosts"].items()) == {
        "broken": "task_failed", "ecc": "failed", "err": "error", "gone": "unreachable",
        "ok-1": "healthy", "warn-1": "warning", "warn-2": "warning"}
    assert report["totals"] == {"hosts": 7, "healthy": 1, "warning": 2, "failed": 1, "error": 1, "unreachable": 1, "task_failed": 1}
    assert report["hosts"]["ecc"]["failing_checks"] == ["gpu.ecc_errors"]
    assert report["hosts"]["ecc"]["warning_checks"] == ["gpu.persistence_mode"]
    assert report["hosts"]["gone"]["message"].endswith("Connection refused") and report["hosts"]["gone"]["doctor"] is None


def test_counts_failing_hosts_with_gpus_and_ranked_actions():
    report = _fleet()
    assert report["checks"]["gpu.ecc_errors"] == {"PASS": 2, "WARN": 0, "FAIL": 1, "SKIP": 1, "ERROR": 1}
    assert report["failing"]["gpu.ecc_errors"] == [
        {"host": "ecc", "status": "FAIL", "message": "gpu.ecc_errors is FAIL", "gpus": [gpu_ref(GPU0)]},
        {"host": "err", "status": "ERROR", "message": "gpu.ecc_errors is ERROR", "gpus": []}]
    # one action per (check, status): exactly the hosts at that status, with that status's remediation
    assert [(a["check_id"], a["status"], a["hosts"], a["remediation"]) for a in report["actions"]] == [
        ("gpu.ecc_errors", "FAIL", ["ecc"], "drain and reset"),
        ("gpu.ecc_errors", "ERROR", ["err"], "fix nvidia-smi"),
        ("gpu.persistence_mode", "ERROR", ["err"], None),
        ("gpu.persistence_mode", "WARN", ["ecc", "warn-1", "warn-2"], "nvidia-smi -pm 1")]
    # the hint most hosts share speaks for the group
    assert report["actions"][3]["host_count"] == 3


def test_a_later_failure_does_not_erase_a_doctor_verdict():
    c = FleetCollector()
    c.add_doctor("h", _doctor(_check("gpu.count", "PASS")))
    c.add_task_failed("h", "a later task failed")
    c.add_unreachable("h2", "gone")
    c.add_doctor("h2", _doctor(_check("gpu.count", "WARN")))
    report = c.build("t")
    assert report["hosts"]["h"]["status"] == "healthy" and report["hosts"]["h2"]["status"] == "warning"


def test_terminal_summary_lists_failures_with_gpus_and_top_actions():
    lines = terminal.render(_fleet(), ["/r/fleet-report.json"])
    text = "\n".join(t for t, dummy in lines)
    assert "7 hosts: 1 healthy, 2 warning, 1 failed, 1 error, 1 unreachable, 1 task failed" in text
    assert "FAIL  gpu.ecc_errors               ecc (GPU 0 00000000:01:00.0 GPU-aaa)" in text
    assert "UNREACHABLE gone" in text and "TASK FAILED broken" in text
    assert "  1. [FAIL] gpu.ecc_errors on 1 host: drain and reset" in text
    assert text.endswith("Report: /r/fleet-report.json")
    colours = dict((t.split()[0], c) for t, c in lines if t.strip())
    assert colours["FAIL"] == "red"


def test_terminal_summary_of_a_healthy_fleet_and_long_host_lists():
    c = FleetCollector()
    for i in range(3):
        c.add_doctor("h%d" % i, _doctor(_check("gpu.count", "PASS")))
    assert terminal.render(c.build("t"))[-1] == ("All hosts healthy.", "green")
    for i in range(20):
        c.add_doctor("bad%02d" % i, _doctor(_check("gpu.count", "FAIL", "replace")))
    text = "\n".join(t for t, dummy in terminal.render(c.build("t")))
    assert "20 hosts: bad00, bad01, bad02, bad03, bad04 +15 more" in text and "bad05" not in text


def test_a_doctor_result_without_checks_is_not_a_healthy_host():
    c = FleetCollector()
    # failed_when: false hides a module crash as "ok": it must not read as healthy.
    c.add_doctor("crashed", {"failed": False, "msg": "MODULE FAILURE\nSee stdout/stderr for the exact error"})
    c.add_doctor("listed", {"changed": False, "catalogue": [{"id": "gpu.count"}]})
    report = c.build("t")
    assert report["hosts"]["crashed"]["status"] == "task_failed"
    assert report["hosts"]["crashed"]["message"] == "doctor returned no checks: MODULE FAILURE See stdout/stderr for the exact error"
    assert "listed" not in report["hosts"]


def test_a_host_the_fabric_test_left_out_as_busy_is_unchecked_never_healthy():
    # The planner's section and checks for three hosts, n02 busy (SKIP "not tested"); n01 has a doctor verdict too.
    busy = "node busy (GPU process 41234 on GPU-5d2e); force: true loads it anyway"
    state = isolate(SimulatedFabric(3), busy={"n02": busy})
    c = FleetCollector()
    c.add_doctor("n01", _doctor(_check("gpu.ecc_errors", "PASS")))
    c.add_fabric(fabric.section(state), fabric.host_checks(state))
    report = c.build("2026-11-22T13:00:00+00:00", "fabric.yml")
    assert report["hosts"]["n02"]["status"] == "unchecked"
    assert report["hosts"]["n02"]["message"] == "fabric: not tested: " + busy
    assert report["hosts"]["n00"]["status"] == "healthy" and report["hosts"]["n01"]["status"] == "healthy"
    assert report["fabric"]["busy"] == [{"host": "n02", "reason": busy}]

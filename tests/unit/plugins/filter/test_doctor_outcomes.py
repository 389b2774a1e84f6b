"""The doctor_outcomes filter: registered doctor results and fleet reports reduced to one outcome per host."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.continuum.hydra.plugins.filter.doctor_outcomes import doctor_outcomes
from ansible_collections.continuum.hydra.plugins.filter.fleet_stats import fleet_stats


def doctor_result(overall, **statuses):
    return {"overall_status": overall, "checks": [{"id": cid.replace("__", "."), "status": st} for cid, st in statuses.items()]}


def test_registered_results_unreachable_failed_task_and_missing_hosts():
    hostvars = {
        "ok": {"hydra_doctor": doctor_result("warning", gpu__persistence_mode="WARN", gpu__ecc_errors="PASS")},
        "bad": {"hydra_doctor": doctor_result("failed", gpu__ecc_errors="FAIL", gpu__nvlink="ERROR", disk__space="SKIP")},
        "gone": {"hydra_doctor": {"unreachable": True, "msg": "ssh: connect to host 10.0.0.9 port 22: Connection refused"}},
        "crashed": {"hydra_doctor": {"failed": True, "msg": "MODULE FAILURE"}},
        "skipped": {"hydra_doctor": {"skipped": True}},
        "never-ran": {},
    }
    out = doctor_outcomes(hostvars, ["ok", "bad", "gone", "crashed", "skipped", "never-ran", "not-in-inventory"])
    assert out["ok"] == {"status": "warning", "failing_checks": [], "warning_checks": ["gpu.persistence_mode"],
                         "message": "doctor: warning"}
    assert out["bad"]["status"] == "failed"
    assert out["bad"]["failing_checks"] == ["gpu.ecc_errors", "gpu.nvlink"]
    assert out["gone"] == {"status": "unreachable", "failing_checks": [], "warning_checks": [],
                           "message": "ssh: connect to host 10.0.0.9 port 22: Connection refused"}
    assert out["crashed"]["status"] == "error" and "MODULE FAILURE" in out["crashed"]["message"]
    assert out["skipped"]["status"] == "unknown"
    assert out["never-ran"]["status"] == "unreachable"
    assert out["not-in-inventory"]["status"] == "unreachable"


def test_result_var_is_configurable():
    out = doctor_outcomes({"h": {"mine": doctor_result("healthy", gpu__count="PASS")}}, ["h"], result_var="mine")
    assert out["h"]["status"] == "healthy"


def test_fleet_report():
    report = {"kind": "continuum.hydra.fleet_report", "hosts": {
        "a": {"status": "failed", "message": None, "failing_checks": ["gpu.ecc_errors"], "warning_checks": []},
        "b": {"status": "task_failed", "message": "python not found", "failing_checks": [], "warning_checks": []},
        "c": {"status": "unreachable", "message": "timed out", "failing_checks": [], "warning_checks": []},
        "d": {"status": "unchecked", "message": None, "failing_checks": [], "warning_checks": []},
    }}
    out = doctor_outcomes(report)
    assert sorted(out) == ["a", "b", "c", "d"]
    assert out["d"]["status"] == "unknown"  # profiled only: the gate leaves it alone
    assert out["a"]["failing_checks"] == ["gpu.ecc_errors"]
    assert out["b"] == {"status": "error", "failing_checks": [], "warning_checks": [],
                        "message": "doctor task failed: python not found"}
    assert out["c"]["status"] == "unreachable"
    assert doctor_outcomes(report, ["a", "z"])["z"]["status"] == "unknown"


def _link_finding(host, check_id, status, open_=True, subject="mlx5_0 port 1", message="link_downed +2 since the last run (24.0 h)"):
    """A finding of the report's store as findings.update_store leaves an interconnect one."""
    return {"host": host, "check_id": check_id, "subject": subject, "status": status, "message": message, "open": open_,
            "clears_after": 3}


def test_open_interconnect_findings_of_a_fleet_report_join_the_hosts_outcome():
    """Doctor's one-run verdict cannot see a link that went down between runs: a saved report's open interconnect
    FAIL makes the host failed (the gate drains it, the proof in its reason), an open WARN a healthy host warning;
    closed findings, other checks' findings and unreachable hosts are left as doctor's."""
    healthy = {"status": "healthy", "message": None, "failing_checks": [], "warning_checks": []}
    report = {"kind": "continuum.hydra.fleet_report", "hosts": dict(
        (name, dict(healthy)) for name in ("downed", "flapped", "closed", "gpu-only", "gone")), "findings": [
        _link_finding("downed", "interconnect.ib_errors", "FAIL"),
        _link_finding("downed", "interconnect.flap", "WARN", message="state ACTIVE -> DOWN since the last run"),
        _link_finding("flapped", "interconnect.flap", "WARN"),
        _link_finding("closed", "interconnect.ib_errors", "FAIL", open_=False),
        dict(_link_finding("gpu-only", "gpu.ecc_errors", "FAIL"), subject=None),
        _link_finding("gone", "interconnect.ib_errors", "FAIL"),
    ]}
    report["hosts"]["gone"] = {"status": "unreachable", "message": "timed out", "failing_checks": [], "warning_checks": []}
    out = doctor_outcomes(report)
    assert out["downed"] == {"status": "failed", "failing_checks": ["interconnect.ib_errors"],
                             "warning_checks": ["interconnect.flap"], "message": "doctor: healthy; interconnect: 2 open findings",
                             "proof": "mlx5_0 port 1: link_downed +2 since the last run (24.0 h)"}
    assert out["flapped"]["status"] == "warning" and out["flapped"]["warning_checks"] == ["interconnect.flap"]
    assert "proof" not in out["flapped"]
    for host, status in (("closed", "healthy"), ("gpu-only", "healthy"), ("gone", "unreachable")):
        assert out[host]["status"] == status and out[host]["failing_checks"] == [], host
    # doctor's verdicts alone when asked
    assert doctor_outcomes(report, interconnect=False)["downed"]["status"] == "healthy"
    with pytest.raises(AnsibleFilterError, match="interconnect must be true or false, got 'no'"):
        doctor_outcomes(report, interconnect="no")


def test_an_interconnect_fail_adds_to_a_failing_hosts_checks_and_proof():
    report = {"kind": "continuum.hydra.fleet_report", "hosts": {"h": {
        "status": "failed", "message": None, "failing_checks": ["fabric.collective"], "warning_checks": [],
        "doctor": {"checks": [{"id": "fabric.collective", "status": "FAIL", "details": {"proof": "rounds 1,2: 0.1<0.5 GB/s"}}]}}},
        "findings": [_link_finding("h", "interconnect.peer_ports", "FAIL", subject="mlx5_1 port 1", message="DOWN")]}
    out = doctor_outcomes(report)["h"]
    assert out["failing_checks"] == ["fabric.collective", "interconnect.peer_ports"]
    assert out["proof"] == "rounds 1,2: 0.1<0.5 GB/s; mlx5_1 port 1: DOWN"


@pytest.mark.parametrize("status, found, outcome", [
    ("task_failed", "FAIL", "failed"),   # doctor erred this run: the downed link is still a fact
    ("error", "FAIL", "failed"),
    ("unchecked", "FAIL", "failed"),
    ("missing", "FAIL", "failed"),
    ("error", "WARN", "error"),
    ("unchecked", "WARN", "unknown"),  # never warning: the gate would resume a node nobody checked
    ("failed", "WARN", "failed"),
    ("unreachable", "FAIL", "unreachable"),
])
def test_an_open_interconnect_finding_on_hosts_doctor_did_not_judge_healthy(status, found, outcome):
    report = {"kind": "continuum.hydra.fleet_report", "hosts": {"h": {
        "status": status, "message": "m", "failing_checks": [], "warning_checks": []}},
        "findings": [_link_finding("h", "interconnect.ib_errors", found)]}
    assert doctor_outcomes(report)["h"]["status"] == outcome


def test_each_open_interconnect_fail_is_in_the_proof():
    report = {"kind": "continuum.hydra.fleet_report", "hosts": {"h": {
        "status": "healthy", "message": None, "failing_checks": [], "warning_checks": []}},
        "findings": [_link_finding("h", "interconnect.ib_errors", "FAIL"),
                     _link_finding("h", "interconnect.peer_ports", "FAIL", subject="mlx5_1 port 1", message="DOWN")]}
    assert doctor_outcomes(report)["h"]["proof"] == "mlx5_0 port 1: link_downed +2 since the last run (24.0 h); mlx5_1 port 1: DOWN"


@pytest.mark.parametrize("source, hosts, message", [
    ({}, None, "doctor_outcomes: give the hosts to report on"),
    ({}, "gpu-a", "doctor_outcomes: hosts must be a list of host names, got 'gpu-a'"),
    ({"kind": "continuum.hydra.fleet_report", "hosts": {"a": {"status": "sick"}}}, None,
     "doctor_outcomes: fleet report host status 'sick' is not one of"),
    ({"h": {"hydra_doctor": "text"}}, ["h"], "doctor_outcomes: hydra_doctor of h must be a doctor result dict, got str"),
    ([1, 2], ["h"], "doctor_outcomes: input must be hostvars or a fleet report dict, got list"),
])
def test_bad_input_is_one_clear_line(source, hosts, message):
    with pytest.raises(AnsibleFilterError) as err:
        doctor_outcomes(source, hosts)
    assert str(err.value).startswith(message)


def test_nothing_judged_or_an_unbacked_block_is_never_healthy_and_never_resumable():
    """An empty check list judged nothing; a SKIP blocked by a root that is not failing in the result counts as ERROR."""
    unbacked = doctor_result("healthy", gpu__ecc_errors="SKIP")
    unbacked["checks"][0]["blocked_by"] = "driver.nvidia_smi"  # the root itself is not in the result
    backed = doctor_result("error", driver__nvidia_smi="ERROR", gpu__ecc_errors="SKIP")
    backed["checks"][1]["blocked_by"] = "driver.nvidia_smi"
    hostvars = {"empty": {"hydra_doctor": doctor_result("healthy")}, "unbacked": {"hydra_doctor": unbacked},
                "backed": {"hydra_doctor": backed}}
    out = doctor_outcomes(hostvars, ["empty", "unbacked", "backed"])
    assert out["empty"]["status"] == "unknown"
    assert out["unbacked"]["status"] == "error" and out["unbacked"]["failing_checks"] == ["gpu.ecc_errors"]
    assert out["backed"]["status"] == "error" and out["backed"]["failing_checks"] == ["driver.nvidia_smi"]


def test_a_host_missing_from_every_slice_of_a_merged_report_is_left_alone():
    report = {"kind": "continuum.hydra.fleet_report", "hosts": {"n5": {"status": "missing", "message": "in no slice"}}}
    assert doctor_outcomes(report)["n5"]["status"] == "unknown"


def test_both_filters_judge_the_same_hostvars_alike():
    """doctor_outcomes and fleet_stats read registered results through one FleetCollector.from_hostvars: the hosts
    one calls failed or errored are the other's failing hosts, its warning hosts the other's, whatever the result."""
    blocked = doctor_result("healthy", gpu__ecc_errors="SKIP")
    blocked["checks"][0]["blocked_by"] = "driver.nvidia_smi"  # a root not in the result: ERROR
    hostvars = {
        "ok": {"hydra_doctor": doctor_result("healthy", gpu__ecc_errors="PASS")},
        "warn": {"hydra_doctor": doctor_result("warning", gpu__persistence_mode="WARN")},
        "bad": {"hydra_doctor": doctor_result("failed", gpu__ecc_errors="FAIL", disk__space="SKIP")},
        "blocked": {"hydra_doctor": blocked},
        "gone": {"hydra_doctor": {"unreachable": True, "msg": "ssh: Connection refused"}},
        "crashed": {"hydra_doctor": {"failed": True, "msg": "MODULE FAILURE"}},
        "skipped": {"hydra_doctor": {"skipped": True}},
        # continuum.hydra.screen: the node's job never ran; not judged, neither failed nor healthy
        "busy": {"hydra_doctor": {"screen": {"screened": False, "reason": "node busy: job 41 holds it"}, "msg": "not screened"}},
        "never-ran": {},
    }
    hosts = sorted(hostvars)
    outcomes = doctor_outcomes(hostvars, hosts)
    stats = fleet_stats(hostvars, hosts)["hydra_fleet"]
    assert stats["failing_hosts"] == sorted(h for h, o in outcomes.items() if o["status"] in ("failed", "error", "unreachable"))
    assert stats["warning_hosts"] == sorted(h for h, o in outcomes.items() if o["status"] == "warning") == ["warn"]
    assert outcomes["busy"] == {"status": "unknown", "failing_checks": [], "warning_checks": [],
                                "message": "not screened: node busy: job 41 holds it"}
    assert stats["totals"]["unchecked"] == 2  # busy and skipped
    assert stats["failing_hosts"] == ["bad", "blocked", "crashed", "gone", "never-ran"]

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

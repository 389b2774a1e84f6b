"""The fleet_part_stats filter: one AWX slice's set_stats data, with each failing and warning host's check ids."""

import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.continuum.hydra.plugins.filter.fleet_part_stats import fleet_part_stats


def _doctor(*checks):
    return {"schema_version": "1.1.0", "checks": [dict(chk, message=chk["status"], details={}) for chk in checks]}


HOSTVARS = {
    "ok": {"hydra_doctor": _doctor({"id": "gpu.ecc_errors", "status": "PASS"})},
    "warn": {"hydra_doctor": _doctor({"id": "gpu.persistence_mode", "status": "WARN"}, {"id": "gpu.ecc_errors", "status": "PASS"})},
    "bad": {"hydra_doctor": dict(_doctor({"id": "gpu.persistence_mode", "status": "WARN"}, {"id": "gpu.ecc_errors", "status": "FAIL"}),
                                 failed=True, msg="doctor: host is failed (fail_on=fail)")},
    "nosmi": {"hydra_doctor": _doctor({"id": "driver.nvidia_smi", "status": "ERROR"},
                                      {"id": "gpu.ecc_errors", "status": "SKIP", "blocked_by": "driver.nvidia_smi"})},
    "gone": {},
}


def test_each_failing_and_warning_host_gets_its_check_ids_worst_first():
    data = fleet_part_stats(HOSTVARS, sorted(HOSTVARS), 77, "101")["hydra_fleet_part_101"]
    assert data["host_statuses"] == {"bad": "failed", "gone": "unreachable", "nosmi": "error", "ok": "healthy", "warn": "warning"}
    assert data["host_checks"] == {"bad": {"FAIL": ["gpu.ecc_errors"], "WARN": ["gpu.persistence_mode"], "more": 0},
                                   "nosmi": {"ERROR": ["driver.nvidia_smi"], "more": 0},
                                   "warn": {"WARN": ["gpu.persistence_mode"], "more": 0}}
    assert (data["workflow_job_id"], data["job_id"], data["failing_checks"]) == ("77", "101", {"driver.nvidia_smi": 1, "gpu.ecc_errors": 1})
    assert list(json.loads(json.dumps(data["host_checks"]["bad"]))) == ["FAIL", "WARN", "more"]


def test_a_host_failing_more_checks_than_the_bound_carries_eight_and_a_count():
    many = {"h": {"hydra_doctor": _doctor(*[{"id": "gpu.c%02d" % n, "status": "FAIL"} for n in range(11)])}}
    carried = fleet_part_stats(many, ["h"], 1, 2)["hydra_fleet_part_2"]["host_checks"]["h"]
    assert carried == {"FAIL": ["gpu.c%02d" % n for n in range(8)], "more": 3}


@pytest.mark.parametrize("args, message", [
    (("ok", ["ok"], 1, 2), "fleet_part_stats: give hostvars and the slice's list of hosts"),
    ((HOSTVARS, ["ok"], "../x", 2), "fleet_part_stats: awx_workflow_job_id '../x' is not an AWX id"),
])
def test_bad_input_is_one_clear_error(args, message):
    with pytest.raises(AnsibleFilterError) as info:
        fleet_part_stats(*args)
    assert str(info.value).startswith(message)

"""The fleet_stats filter: set_stats data for AWX workflows, from registered doctor results or a fleet report."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.continuum.hydra.plugins.filter.fleet_stats import fleet_stats
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector


def _doctor(*statuses):
    return {"schema_version": "1.1.0", "checks": [{"id": "gpu.c%d" % n, "status": s, "message": s, "details": {}}
                                                  for n, s in enumerate(statuses)]}


HOSTVARS = {
    "ok": {"hydra_doctor": _doctor("PASS", "SKIP")},
    "warn": {"hydra_doctor": _doctor("PASS", "WARN")},
    "bad": {"hydra_doctor": dict(_doctor("FAIL", "WARN"), failed=True, msg="doctor: host is failed (fail_on=fail)")},
    "nopython": {"hydra_doctor": {"failed": True, "msg": "/nonexistent/bin/python3: not found"}},
    "skipped": {"hydra_doctor": {"skipped": True, "changed": False}},
    "gone": {},
}


def test_hostvars_become_counts_and_host_lists():
    data = fleet_stats(HOSTVARS, ["ok", "warn", "bad", "nopython", "skipped", "gone"])["hydra_fleet"]
    assert data["totals"] == {"hosts": 6, "healthy": 1, "warning": 1, "failed": 1, "error": 0, "unreachable": 1,
                              "task_failed": 1, "unchecked": 1}
    assert data["failing_hosts"] == ["bad", "gone", "nopython"]
    assert data["warning_hosts"] == ["warn"]
    assert data["failing_checks"] == {"gpu.c0": 1}
    assert data["ok"] is False and "straggler_hosts" not in data


def test_a_fleet_report_gives_the_same_summary_plus_its_analysis():
    collector = FleetCollector()
    collector.add_doctor("ok", _doctor("PASS"))
    report = collector.build("2026-11-22T13:00:00+00:00")
    assert fleet_stats(report)["hydra_fleet"] == {"generated_at": "2026-11-22T13:00:00+00:00", "ok": True,
                                                  "totals": report["totals"], "failing_hosts": [], "warning_hosts": [],
                                                  "failing_checks": {}}
    report["analysis"] = {"drift": {"items": []}, "stragglers": {"hosts": [{"host": "ok"}], "gpus": []},
                          "bottleneck": {"primary": "disk_io"}}
    data = fleet_stats(report)["hydra_fleet"]
    assert data["straggler_hosts"] == ["ok"] and data["drift_hosts"] == [] and data["bottleneck"] == "disk_io"


@pytest.mark.parametrize("args, message", [
    ((HOSTVARS,), "fleet_stats: give the hosts to summarise"),
    ((HOSTVARS, "ok"), "fleet_stats: hosts must be a list of host names, got 'ok'"),
    (({"ok": {"hydra_doctor": "PASS"}}, ["ok"]), "fleet_stats: hydra_doctor of ok must be a doctor result dict, got str"),
    (({"ok": ["hydra_doctor"]}, ["ok"]), "fleet_stats: hostvars of ok is not a mapping of variables"),
    (([1, 2], ["ok"]), "fleet_stats: input must be hostvars or a fleet report dict, got list"),
    (({"kind": "continuum.hydra.fleet_report", "hosts": {}},), "fleet_stats: the fleet report has no 'totals'"),
])
def test_bad_input_is_one_clear_error(args, message):
    with pytest.raises(AnsibleFilterError) as info:
        fleet_stats(*args)
    assert str(info.value).startswith(message)


class _Guarded(dict):
    """A check record that fails the test when the filter reads more than id, status and blocked_by (and, of a check
    that may fail, its details: a drain reason's proof)."""

    def __getitem__(self, key):
        may_fail = dict.get(self, "status") in ("FAIL", "ERROR") or dict.get(self, "blocked_by")
        if key not in ("id", "status", "blocked_by") and not (key == "details" and may_fail):
            raise AssertionError("fleet_stats read %r of a check" % key)
        return dict.__getitem__(self, key)

    def get(self, key, default=None):
        return self[key] if key in self else default


def test_the_filter_reads_each_check_once_and_only_what_the_summary_needs():
    checks = [{"id": "driver.nvidia_smi", "status": "PASS", "message": "ok", "details": {}},
              {"id": "gpu.ecc_errors", "status": "FAIL", "message": "3 uncorrectable", "details": {"gpus": [{"index": 0}]},
               "remediation": "drain"},
              # blocked by a root that is not failing: the host's verdict counts it as ERROR (report.judged)
              {"id": "gpu.clocks", "status": "SKIP", "blocked_by": "driver.nvidia_smi", "message": "blocked", "details": {}}]
    guarded = {"h1": {"hydra_doctor": {"checks": [_Guarded(c) for c in checks]}}}
    plain = {"h1": {"hydra_doctor": {"checks": checks}}}
    collector = FleetCollector()
    collector.add_doctor("h1", {"checks": checks})
    full = collector.build("2026-11-24T12:00:00+00:00")
    data = fleet_stats(guarded, ["h1"])["hydra_fleet"]
    assert data["failing_checks"] == {"gpu.ecc_errors": 1} == dict(
        (cid, len(entries)) for cid, entries in full["failing"].items())
    assert data["totals"] == full["totals"] and data["failing_hosts"] == ["h1"]
    data.pop("generated_at")
    plain_data = fleet_stats(plain, ["h1"])["hydra_fleet"]
    plain_data.pop("generated_at")
    assert data == plain_data

"""The fleet-level checker alarm (issue 27 item 4): one alarm, first among the actions, when most hosts err or fail alike.

Hosts are doctor results built through the production functions (tests/support/fleet_factory.py), collected by the
real FleetCollector and analysed by the real analyse().
"""

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import analyse
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.checker import ALARM_ID
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector
from ansible_collections.continuum.hydra.tests.support.fleet_factory import check, doctor_result, environment, recorded_smi

SMI = recorded_smi("a100-sxm4-v12.xml")


def _report(outcomes):
    """host -> list of (check id, status): each host's doctor result; 'unreachable' for a host doctor never reached."""
    collector = FleetCollector()
    for host, checks in outcomes.items():
        if checks == "unreachable":
            collector.add_unreachable(host, "ssh: connection refused")
            continue
        env = environment(host, SMI, SMI["gpus"], "AMD EPYC 7763 64-Core Processor", 1024 ** 4)
        collector.add_doctor(host, doctor_result(env, [check(check_id, status, remediation="fix it") for check_id, status in checks]))
    return analyse(collector.build("2026-11-26T00:00:00+00:00"))


def test_a_fleet_wide_checker_error_is_one_alarm_ranked_first():
    hosts = dict(("gpu-%d" % n, [("gpu.ecc_errors", "PASS"), ("gpu.dcgm_diag", "ERROR")]) for n in range(5))
    hosts["gpu-5"] = [("gpu.ecc_errors", "FAIL"), ("gpu.dcgm_diag", "PASS")]
    report = _report(hosts)
    alarm = report["analysis"]["checker"]
    assert alarm["tripped"] is True and alarm["hosts"] == ["gpu-%d" % n for n in range(5)]
    assert report["actions"][0]["check_id"] == ALARM_ID and report["actions"][0]["host_count"] == 5
    assert report["actions"][0]["remediation"].startswith("5 of 6 nodes could not be judged (error or unreachable), more than 50%")
    assert report["analysis"]["problems"] == ["checker alarm: %s" % alarm["why"]]
    # The real FAIL is still in the report, right after the alarm.
    assert [(a["check_id"], a["status"]) for a in report["actions"][1:]] == [("gpu.ecc_errors", "FAIL"), ("gpu.dcgm_diag", "ERROR")]


def test_the_same_check_failing_on_most_hosts_raises_the_alarm_and_unreachable_hosts_count_as_unjudged():
    report = _report({"a": [("driver.version", "FAIL")], "b": [("driver.version", "FAIL")], "c": [("driver.version", "FAIL")],
                      "d": [("driver.version", "PASS")]})
    assert report["analysis"]["checker"]["check_id"] == "driver.version"
    report = _report({"a": "unreachable", "b": "unreachable", "c": "unreachable", "d": [("gpu.ecc_errors", "PASS")]})
    assert report["analysis"]["checker"]["unjudged"] == ["a", "b", "c"] and report["actions"][0]["check_id"] == ALARM_ID


def test_a_few_real_faults_raise_no_alarm():
    report = _report({"a": [("gpu.ecc_errors", "FAIL")], "b": [("gpu.ecc_errors", "FAIL")], "c": [("gpu.ecc_errors", "PASS")]})
    assert report["analysis"]["checker"]["tripped"] is False
    assert report["analysis"]["problems"] == [] and all(a["check_id"] != ALARM_ID for a in report["actions"])

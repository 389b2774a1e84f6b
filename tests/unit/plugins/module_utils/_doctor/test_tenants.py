"""Tenant SLOs: metric files in both formats and garbage, every state transition, bully ranking, tier 1 and 2."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import tenants
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.tenants import COOLDOWN, DEGRADED, NORMAL, VIOLATED


@pytest.mark.parametrize("text, value", [
    ("p99_latency_ms: 87.5\n", 87.5),
    ("87.5", 87.5),
    ("  120\n", 120.0),
    ("p99_latency_ms=12", 12.0),
    ("# written by the serving loop\nqps: 1200\np99_latency_ms: 40\n", 40.0),
    ("p99_latency_ms: 1e2", 100.0),
])
def test_both_formats(text, value):
    assert tenants.parse_metric(text) == value


@pytest.mark.parametrize("text, message", [
    ("", "no 'p99_latency_ms: <ms>' line"),
    ("garbage", "'garbage' is not a number"),
    ("p99_latency_ms: fast", "'fast' is not a number"),
    ("p99_latency_ms: nan", "not a non-negative finite number"),
    ("-3", "not a non-negative finite number"),
    ("1\n2\n", "no 'p99_latency_ms: <ms>' line"),
    ("\x00\x01", "binary content"),
])
def test_garbage_is_one_clear_error(text, message):
    with pytest.raises(tenants.MetricError, match=message):
        tenants.parse_metric(text)


@pytest.mark.parametrize("name, pid", [("1234.metric", 1234), ("0.metric", None), ("abc.metric", None),
                                       ("1234.metric.tmp", None), ("-5.metric", None)])
def test_metric_file_names(name, pid):
    assert tenants.metric_pid(name) == pid


def run(observations, persistence=2, cooldown=2, record=None):
    states = []
    for over in observations:
        record = tenants.step(record, over, persistence, cooldown)
        states.append(record["state"])
    return states, record


def test_normal_stays_normal_under_the_slo():
    assert run([False, False])[0] == [NORMAL, NORMAL]


def test_over_once_is_degraded_then_violated_after_persistence_runs():
    assert run([True, True, True], persistence=2)[0] == [DEGRADED, VIOLATED, VIOLATED]
    assert run([True, True, True, True], persistence=3)[0] == [DEGRADED, DEGRADED, VIOLATED, VIOLATED]


def test_persistence_one_is_violated_at_once():
    assert run([True], persistence=1)[0] == [VIOLATED]


def test_degraded_back_under_is_normal_and_the_count_restarts():
    states, record = run([True, False, True], persistence=2)
    assert states == [DEGRADED, NORMAL, DEGRADED] and record["over_runs"] == 1


def test_violated_back_under_cools_down_then_normal_whatever_it_reads_meanwhile():
    states, record = run([True, True, False, True, False, True], persistence=2, cooldown=2)
    # COOLDOWN is not judged: the over reading inside it changes nothing; after 2 cooldown runs NORMAL, then judged again.
    assert states == [DEGRADED, VIOLATED, COOLDOWN, COOLDOWN, NORMAL, DEGRADED]


def test_cooldown_zero_is_normal_at_once():
    assert run([True, True, False], persistence=2, cooldown=0)[0] == [DEGRADED, VIOLATED, NORMAL]


def test_violated_counts_its_runs_and_keeps_tier1():
    record = dict(tenants.new_record(), state=VIOLATED, over_runs=2, violated_runs=1, tier1={"pid": 9, "violated_runs": 1})
    after = tenants.step(record, True, 2, 2)
    assert after["violated_runs"] == 2 and after["over_runs"] == 3 and after["tier1"] == {"pid": 9, "violated_runs": 1}
    assert record["violated_runs"] == 1  # the record given is not changed


def test_an_unknown_state_in_the_file_starts_as_normal():
    assert tenants.step({"state": "BOGUS"}, False, 2, 2)["state"] == NORMAL


def test_io_rates_from_two_samples():
    first = {1: {"read_bytes": 0, "write_bytes": 1000}, 2: {"read_bytes": 5, "write_bytes": 5}, 3: {"read_bytes": 9}}
    second = {1: {"read_bytes": 2000, "write_bytes": 5000}, 2: {"read_bytes": 0, "write_bytes": 5}, 4: {"read_bytes": 1}}
    assert tenants.io_rates(first, second, 2.0) == {
        1: {"read_bps": 1000.0, "write_bps": 2000.0, "io_bps": 3000.0},
        2: {"read_bps": 0.0, "write_bps": 0.0, "io_bps": 0.0},  # a counter that went back (PID reused) counts 0
    }


PROCS = [
    {"pid": 10, "comm": "tenant", "io_bps": 9e9, "gpu_memory_mib": 100},
    {"pid": 11, "comm": "idle", "io_bps": 0, "gpu_memory_mib": None},
    {"pid": 12, "comm": "dd", "io_bps": 5e6, "gpu_memory_mib": None},
    {"pid": 13, "comm": "train", "io_bps": 0, "gpu_memory_mib": 40000},
    {"pid": 14, "comm": "rsync", "io_bps": 8e6, "gpu_memory_mib": None},
    {"pid": 15, "comm": "unreadable", "io_bps": None, "gpu_memory_mib": None},
]


def test_bullies_by_io_then_gpu_memory_without_the_tenant():
    assert [p["pid"] for p in tenants.rank_bullies(PROCS, [10])] == [14, 12, 13]
    assert [p["pid"] for p in tenants.rank_bullies(PROCS, [10], limit=1)] == [14]


@pytest.mark.parametrize("rate, ratio, expected", [
    (8e6, 2.0, 4000000),  # halved: the tenant is twice over
    (8e6, 0.5, 8000000),  # under 1 counts as 1
    (8e8, 2.0, 104857600),  # capped by the maximum
    (1000, 4.0, 1048576),  # never below the minimum
])
def test_io_limit_scaled_and_capped(rate, ratio, expected):
    assert tenants.io_limit(rate, ratio, 1048576, 104857600) == expected


def test_tier1_moves_the_bully_into_its_own_group_with_read_and_write_limits():
    record = dict(tenants.new_record(), state=VIOLATED, violated_runs=1)
    plan = tenants.mitigation(record, PROCS[4], 2.0, ["254:0", "8:0"], 1048576, 104857600, 2, [])
    assert plan["tier"] == 1
    assert plan["cgroup_limits"] == [{"name": "tenant-bully-14", "pids": [14], "io_max": [
        {"device": "254:0", "rbps": 4000000, "wbps": 4000000}, {"device": "8:0", "rbps": 4000000, "wbps": 4000000}]}]
    assert "PID 14 (rsync)" in plan["why"]


def test_tier2_once_tier1_did_not_help_within_the_persistence_window():
    record = dict(tenants.new_record(), state=VIOLATED, violated_runs=3, tier1={"pid": 14, "violated_runs": 2})
    assert tenants.mitigation(record, PROCS[4], 2.0, ["254:0"], 1, 10 ** 9, 2, ["0"])["tier"] == 1  # 1 run since: wait
    record["violated_runs"] = 4
    plan = tenants.mitigation(record, PROCS[4], 2.0, ["254:0"], 1, 10 ** 9, 2, ["0"])
    assert plan["tier"] == 2 and plan["mig_gpus"] == ["0"] and plan["cgroup_limits"] == []
    assert "still over" in plan["why"]


def test_tier2_for_a_bully_without_io_and_none_without_a_bully():
    record = dict(tenants.new_record(), state=VIOLATED, violated_runs=1)
    assert tenants.mitigation(record, PROCS[3], 2.0, ["254:0"], 1, 10 ** 9, 2, ["1"])["tier"] == 2
    assert tenants.mitigation(record, PROCS[2], 2.0, [], 1, 10 ** 9, 2, [])["tier"] == 2  # no disk to limit
    none = tenants.mitigation(record, None, 2.0, ["254:0"], 1, 10 ** 9, 2, [])
    assert none["tier"] is None and "nothing to limit" in none["why"]


@pytest.mark.parametrize("data, problem", [
    (None, None),
    ({"schema": 1, "runs": 4, "updated_at": "t", "tenants": {"1:2": {"state": DEGRADED}, "bad": 3}}, None),
    ({"unparsable": True}, "not a schema 1 tenant state file"),
    ([1, 2], "not a schema 1 tenant state file"),
    ({"schema": 99, "tenants": {}}, "not a schema 1 tenant state file"),
])
def test_read_document(data, problem):
    document, found = tenants.read_document(data)
    assert found == problem or (problem and problem in found)
    if data and not problem:
        assert document["runs"] == 4 and document["tenants"] == {"1:2": {"state": DEGRADED}}
    else:
        assert document["tenants"] == {} and document["runs"] == 0


def test_tier1_keeps_the_limit_it_applied_rather_than_scaling_the_throttled_rate_down():
    # Once throttled the bully writes at the limit; scaling that rate again would ratchet the limit down every tick.
    record = dict(tenants.new_record(), state=VIOLATED, violated_runs=2,
                  tier1={"pid": 14, "violated_runs": 2, "limit_bps": 2000000})
    throttled = dict(PROCS[4], io_bps=2000000)
    plan = tenants.mitigation(record, throttled, 2.0, ["254:0"], 1048576, 104857600, 2, [])
    assert plan["tier"] == 1 and plan["cgroup_limits"][0]["io_max"][0]["wbps"] == 2000000
    other = dict(PROCS[2])  # a different bully is scaled from its own rate
    assert tenants.mitigation(record, other, 2.0, ["254:0"], 1048576, 104857600, 2, [])["cgroup_limits"][0]["io_max"][0]["wbps"] \
        == 2500000

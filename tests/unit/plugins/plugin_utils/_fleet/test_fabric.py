"""The fabric planner on a simulated fabric: every placement of one and two slow hosts among 3..16, under noise.

The simulated fabric is a pure function: a group's bus bandwidth is the lowest capacity of its hosts and of the
ring links it uses (each member to the next, the last to the first), times a seeded noise of +-5 %. Healthy hosts
run at 10 GB/s, slow ones at 1 GB/s; the absolute floor, where set, is 5 GB/s.
"""

import itertools
import math

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS, SKIP, WARN
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import fabric as F
from ansible_collections.continuum.hydra.tests.support.fabric import FLOOR, SimulatedFabric, isolate, named_by


@pytest.mark.parametrize("floors", [True, False], ids=["absolute", "relative"])
@pytest.mark.parametrize("count", range(3, 17))
def test_one_slow_host_is_named_within_ceil_log2_n_plus_2_rounds_wherever_it_is(count, floors):
    for slow in range(count):
        fabric = SimulatedFabric(count, slow=(slow,), seed=count * 31 + slow)
        state = isolate(fabric, floors)
        assert set(state["bad"]) == {fabric.hosts[slow]}, (count, slow, state["bad"])
        assert named_by(state) <= F.bound_one(count) == math.ceil(math.log2(count)) + 2
        assert set(state["good"]) == set(fabric.hosts) - {fabric.hosts[slow]}
        assert not state["links"] and not state["errored"]


# Relative judging needs a screening pair free of slow hosts: with two slow hosts, N >= 6.
@pytest.mark.parametrize("count,floors", [(count, True) for count in range(4, 17)] + [(count, False) for count in range(6, 17)],
                         ids=lambda value: {True: "absolute", False: "relative"}.get(value, str(value)))
def test_two_slow_hosts_are_both_named_within_ceil_log2_n_plus_3_rounds(count, floors):
    for slow in itertools.combinations(range(count), 2):
        fabric = SimulatedFabric(count, slow=slow, seed=sum(slow) * 7 + count)
        state = isolate(fabric, floors)
        assert set(state["bad"]) == {fabric.hosts[i] for i in slow}, (count, slow, state["bad"])
        assert named_by(state) <= F.bound_two(count)
        assert not state["links"]


@pytest.mark.parametrize("floors", [True, False], ids=["absolute", "relative"])
def test_two_slow_hosts_of_three_cannot_be_told_apart_and_nobody_is_called_good(floors):
    fabric = SimulatedFabric(3, slow=(0, 2))
    state = isolate(fabric, floors)
    checks = F.host_checks(state)
    if floors:  # every pair fails: no host passes, none is isolated, all three are reported failing
        assert state["good"] == [] and state["bad"] == {}
        assert [c[0]["status"] for c in checks.values()] == [FAIL, FAIL, FAIL]
        assert "never isolated" in checks["n01"][0]["message"]
    else:  # the best pair is slow too: relative judging has nothing healthy to compare with (docs/fabric.md)
        assert state["reference_gbps"] < FLOOR


@pytest.mark.parametrize("floors", [True, False], ids=["absolute", "relative"])
@pytest.mark.parametrize("count", range(2, 17))
def test_a_healthy_fabric_flags_nobody_over_repeated_noisy_runs(count, floors):
    for seed in range(20):
        state = isolate(SimulatedFabric(count, seed=seed, noise=0.1), floors)
        assert not state["bad"] and not state["links"] and not state["errored"]
        statuses = {c[0]["status"] for c in F.host_checks(state).values()}
        if floors or count > 2:
            assert statuses == {PASS}, (count, seed)
        else:  # two hosts and no floor: one pair, nothing to compare it with
            assert statuses == {WARN}


def test_with_an_absolute_floor_a_healthy_fabric_costs_one_round():
    state = isolate(SimulatedFabric(16))
    assert len(state["rounds"]) == 1 and state["rounds"][0]["stage"] == F.WHOLE


def test_a_slow_link_between_the_halves_is_probed_across_the_cut_and_named():
    # n03-n04 is slow: the whole ring fails, both halves (n00-n03, n04-n07) pass, the cross probes name the link.
    fabric = SimulatedFabric(8, slow_links=[(3, 4)])
    state = isolate(fabric)
    assert state["bad"] == {}
    assert [link["hosts"] for link in state["links"]] == [["n03", "n04"]]
    stages = [r["stage"] for r in state["rounds"]]
    assert stages == [F.WHOLE, F.HALF, F.HALF]
    assert {g["purpose"] for g in state["rounds"][2]["groups"]} == {F.CROSS}
    checks = F.host_checks(state)
    assert checks["n03"][1]["status"] == WARN and "slow link to n04" in checks["n03"][1]["message"]
    assert checks["n03"][0]["status"] == PASS and checks["n05"][1]["status"] == PASS


def test_a_host_that_does_not_join_is_error_and_the_rest_are_still_judged():
    fabric = SimulatedFabric(8, slow=(5,), absent={1: ("n02",)})
    state = isolate(fabric)
    assert state["errored"]["n02"]["kind"] == "did not join" and state["errored"]["n02"]["round"] == 1
    assert set(state["bad"]) == {"n05"}
    assert named_by(state) <= F.bound_one(7) + 1  # one round lost to the group that did not finish
    checks = F.host_checks(state)
    assert checks["n02"][0]["status"] == ERROR and checks["n02"][0]["message"].startswith("did not join in round 1")
    assert checks["n05"][0]["status"] == FAIL and checks["n00"][0]["status"] == PASS


BUSY = "node busy (SLURM job 4 (train, user alice, running)); force: true loads it anyway"


@pytest.mark.parametrize("floors", [True, False], ids=["absolute", "relative"])
def test_a_busy_host_is_in_no_group_its_partners_are_judged_without_it_and_it_is_skip_never_pass_or_error(floors):
    # n02 busy and n05 slow among 8: n02 is never in a group (no rank loads it), n05 is still named, every other host is
    # proven good, and n02 is SKIP naming the job - not PASS, not ERROR, and no host is in ERROR because of it.
    state = isolate(SimulatedFabric(8, slow=(5,)), floors=floors, busy={"n02": BUSY})
    assert all("n02" not in g["members"] for r in state["rounds"] for g in r["groups"])
    assert set(state["bad"]) == {"n05"} and state["errored"] == {}
    assert named_by(state) <= F.bound_one(7)
    checks = F.host_checks(state)
    assert [c["status"] for c in checks["n02"]] == [SKIP, SKIP]
    assert checks["n02"][0]["message"] == "not tested: " + BUSY and checks["n02"][0]["details"]["busy"] == BUSY
    assert {h: c[0]["status"] for h, c in checks.items() if h not in ("n02", "n05")} == {h: PASS for h in state["good"]}
    assert len(state["good"]) == 6
    section = F.section(state)
    assert section["busy"] == [{"host": "n02", "reason": BUSY}] and "n02" not in section["hosts"]
    assert F.summary_line(state).endswith("not tested (busy): n02")


def test_a_busy_host_of_two_leaves_nothing_to_test_and_a_forced_one_is_tested_and_named():
    alone = isolate(SimulatedFabric(2), busy={"n01": BUSY})
    assert alone["rounds"] == [] and [c["status"] for c in F.host_checks(alone)["n01"]] == [SKIP, SKIP]
    assert F.host_checks(alone)["n00"][0]["message"] == "not tested: no other reachable host to run a collective with"
    forced = isolate(SimulatedFabric(2), forced={"n01": BUSY})
    check = F.host_checks(forced)["n01"][0]
    assert check["status"] == PASS and check["message"].endswith("; force: tested although " + BUSY)
    assert F.section(forced)["forced"] == [{"host": "n01", "reason": BUSY}]


def test_busy_hosts_must_be_hosts_of_the_test_with_a_reason():
    with pytest.raises(F.FabricPlanError, match=r"busy: 'n9' is not one of the hosts"):
        F.start(["n0", "n1"], busy={"n9": BUSY})
    with pytest.raises(F.FabricPlanError, match=r"busy: n1: None is not the idle guard's reason"):
        F.start(["n0", "n1"], busy={"n1": None})


def test_the_proof_names_the_rounds_the_figure_the_floor_and_the_proven_good_partner():
    fabric = SimulatedFabric(8, slow=(6,), noise=0)
    state = isolate(fabric)
    check = F.host_checks(state)["n06"][0]
    assert check["status"] == FAIL
    bad = state["bad"]["n06"]
    assert check["details"]["proof_rounds"] == bad["rounds"] and len(bad["rounds"]) >= 2
    last = [g for r in state["rounds"] for g in r["groups"] if g["id"] == bad["groups"][-1]][0]
    partner = [m for m in last["members"] if m != "n06"]
    assert all(p in state["good"] for p in partner)
    assert check["details"]["proof"] == "rounds %s: 1<5 GB/s with %s" % (",".join(map(str, bad["rounds"])), ",".join(partner))


def test_pairwise_runs_every_pair_once_in_disjoint_rounds():
    for count in range(2, 9):
        schedule = F.pair_schedule(["h%d" % i for i in range(count)])
        pairs = [tuple(p) for r in schedule for p in r]
        assert len(pairs) == len(set(pairs)) == count * (count - 1) // 2
        assert len(schedule) == (count if count % 2 else count - 1)
        for round_pairs in schedule:
            hosts = [h for p in round_pairs for h in p]
            assert len(hosts) == len(set(hosts))


def test_small_groups_go_pairwise_and_a_slow_host_fails_with_everyone():
    state = isolate(SimulatedFabric(4, slow=(2,)))
    assert state["mode"] == F.PAIRWISE and set(state["bad"]) == {"n02"}
    assert all(r["stage"] == F.PAIR for r in state["rounds"])


def test_one_host_alone_is_not_tested():
    state = isolate(SimulatedFabric(1))
    assert state["rounds"] == [] and F.host_checks(state)["n00"][0]["status"] == SKIP


def test_an_incomplete_group_names_the_missing_and_lost_ranks_from_rank_0s_verdict():
    group = {"id": "r1g1", "members": ["a", "b", "c", "d"]}
    verdict = {"complete": False, "missing": [], "lost": [{"rank": 2, "reason": "closed its connection"}], "backend": "tcp"}
    results = {"a": {"rank": 0, "outcome": "peer_lost", "verdict": verdict}, "b": {"rank": 1, "outcome": "peer_lost", "verdict": verdict},
               "c": None, "d": {"rank": 3, "outcome": "peer_lost", "verdict": verdict}}
    outcome = F.group_outcome(group, results)
    assert outcome["complete"] is False
    assert outcome["errors"] == [{"host": "c", "kind": "lost mid-collective", "reason": "closed its connection"}]
    verdict = {"complete": True, "missing": [], "lost": [], "backend": "tcp",
               "rows": [{"bytes": 8, "time_us": 40.0, "busbw_gbps": 0.0001, "verified": True},
                        {"bytes": 1 << 20, "time_us": 900.0, "busbw_gbps": 1.7, "verified": True}]}
    outcome = F.group_outcome(group, {h: {"rank": i, "outcome": "ok", "verdict": verdict} for i, h in enumerate("abcd")})
    assert outcome["complete"] and outcome["busbw_gbps"] == 1.7 and outcome["latency_us"] == 40.0


@pytest.mark.parametrize("options,message", [
    ({"mode": "ring"}, "mode: 'ring' is not one of auto, bisect, pairwise"),
    ({"relative_margin": 1.5}, "relative_margin: 1.5 is not a fraction between 0 and 1"),
    ({"confirmations": 0}, "confirmations: 0 is not a whole number >= 1"),
    ({"colour": "red"}, "fabric options: unknown 'colour'"),
])
def test_bad_options_are_one_line_errors(options, message):
    with pytest.raises(F.FabricPlanError) as error:
        F.start(["a", "b"], {}, options)
    assert str(error.value).startswith(message)


def test_a_bad_floor_is_named():
    with pytest.raises(F.FabricPlanError, match="b: fabric_busbw_gbps_min 'fast' is not a number of GB/s above 0"):
        F.start(["a", "b"], {"b": "fast"})

"""The SLURM gate's pure logic: parsing recorded `scontrol show node -o`, the plan, the brake."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._remediate import slurm
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

HYDRA_DRAIN = "scontrol-show-node-22.05-admin-and-hydra-drain.txt"
DOWN_ETC = "scontrol-show-node-22.05-down-drain-notresponding.txt"


def recorded(name):
    return slurm.parse_show_node(read_fixture("slurm", name))


def node(state, reason=None):
    parts = state.split("+")
    return {"state": state, "flags": parts[1:], "drained": "DRAIN" in parts, "reason": reason}


def outcome(status, *failing):
    return {"status": status, "failing_checks": list(failing), "message": None}


def test_parse_recorded_drains_keeps_reason_text_and_drops_the_stamp():
    nodes = recorded(HYDRA_DRAIN)
    assert sorted(nodes) == ["node1", "node2", "node3", "node4"]
    assert nodes["node1"] == {"state": "IDLE", "flags": [], "drained": False, "reason": None}
    assert nodes["node2"] == {"state": "IDLE+DRAIN", "flags": ["DRAIN"], "drained": True, "reason": "admin: bad fan"}
    # '=' inside the reason and spaces in OS= do not confuse the parser.
    assert nodes["node3"]["reason"] == "hydra: gpu.ecc_errors,x=y"


def test_parse_recorded_down_and_not_responding():
    nodes = recorded(DOWN_ETC)
    assert nodes["node1"] == {"state": "DOWN", "flags": [], "drained": False, "reason": "hydra: unreachable"}
    assert nodes["node3"] == {"state": "IDLE+NOT_RESPONDING", "flags": ["NOT_RESPONDING"], "drained": False, "reason": None}


def test_plan_drains_failures_resumes_only_hydra_drains():
    nodes = recorded(HYDRA_DRAIN)  # node2 admin drain, node3 hydra drain
    outcomes = {"node1": outcome("failed", "gpu.ecc_errors", "gpu.pcie_link"), "node2": outcome("healthy"),
                "node3": outcome("warning"), "node4": outcome("healthy")}
    plan = slurm.plan(outcomes, nodes, {"max_fraction": 0.5})
    assert [(d["node"], d["reason"]) for d in plan["drain"]] == [("node1", "hydra: gpu.ecc_errors,gpu.pcie_link")]
    assert [r["node"] for r in plan["resume"]] == ["node3"]
    leave = dict((entry["node"], entry["why"]) for entry in plan["leave"])
    assert sorted(leave) == ["node2", "node4"]
    assert "drained by an admin (admin: bad fan): hydra never resumes it" in leave["node2"]
    assert plan["brake"]["tripped"] is False


def test_plan_never_drains_an_already_drained_node_again():
    nodes = recorded(HYDRA_DRAIN)
    plan = slurm.plan({"node2": outcome("failed", "a.b"), "node3": outcome("failed", "gpu.ecc_errors")}, nodes)
    assert plan["drain"] == [] and plan["resume"] == []
    assert [e["why"] for e in plan["leave"]] == ["failed, already drained by an admin (admin: bad fan)",
                                                 "failed, already drained by hydra (hydra: gpu.ecc_errors,x=y)"]


def test_error_drains_only_when_asked():
    # Issue 27: "could not judge" (a DCGM host engine down, an NFS hang) drained healthy nodes by default.
    nodes = {"n1": node("IDLE")}
    plan = slurm.plan({"n1": outcome("error", "gpu.nvlink")}, nodes)
    assert plan["drain"] == []
    assert plan["leave"] == [{"node": "n1", "host": "n1", "why": "doctor error (gpu.nvlink): could not judge, state kept (IDLE)"}]
    assert [d["node"] for d in slurm.plan({"n1": outcome("error", "gpu.nvlink")}, nodes, {"drain_on": ["failed", "error"]})["drain"]] == ["n1"]
    assert [d["node"] for d in slurm.plan({"n1": outcome("failed", "gpu.ecc_errors")}, nodes)["drain"]] == ["n1"]
    assert [d["node"] for d in slurm.plan({"n1": outcome("warning")}, nodes, {"drain_on": ["warning"]})["drain"]] == ["n1"]
    assert slurm.DEFAULT_POLICY["drain_on"] == ["failed"]


def _fleet(statuses):
    """n0..nK: each status with its failing check ids; every node in service."""
    outcomes = dict(("n%d" % i, outcome(status, *checks)) for i, (status, checks) in enumerate(statuses))
    return outcomes, dict((name, node("IDLE")) for name in outcomes)


@pytest.mark.parametrize("others, breaker_tripped", [
    ([("healthy", [])] * 3, False),                  # the GPU behind an Xid 79 drain now makes nvidia-smi time out
    ([("error", ["gpu.dcgm_diag"])] * 3, True),      # a checker outage: most nodes err, the breaker holds
])
def test_error_keeps_a_hydra_drain(others, breaker_tripped):
    # Review: an ERROR node hydra drained fell through to the resume branch and went back to users.
    outcomes, nodes = _fleet([("error", ["gpu.inventory"])] + others)
    nodes["n0"] = node("IDLE+DRAIN", "hydra: gpu.xid_errors")
    plan = slurm.plan(outcomes, nodes, {"max_fraction": 1})
    assert plan["breaker"]["tripped"] is breaker_tripped
    assert plan["resume"] == [] and plan["drain"] == []
    assert [e["why"] for e in plan["leave"] if e["node"] == "n0"] == [
        "doctor error (gpu.inventory): could not judge, state kept (IDLE+DRAIN, hydra: gpu.xid_errors)"]
    # With error in drain_on the node is already drained: the drain is kept as it is.
    listed = slurm.plan(outcomes, nodes, {"max_fraction": 1, "drain_on": ["failed", "error"]})
    assert listed["resume"] == [] and "n0" not in [d["node"] for d in listed["drain"]]


def test_breaker_a_fleet_wide_checker_error_drains_nothing_even_when_error_drains():
    # DCGM's host engine down everywhere: 4 of 5 nodes ERROR on gpu.dcgm_diag, one node really fails.
    outcomes, nodes = _fleet([("error", ["gpu.dcgm_diag"])] * 4 + [("failed", ["gpu.ecc_errors"])])
    plan = slurm.plan(outcomes, nodes, {"drain_on": ["failed", "error"], "max_fraction": 1, "max_count": 100})
    assert plan["drain"] == []
    assert plan["breaker"]["tripped"] is True and plan["breaker"]["hosts"] == ["n0", "n1", "n2", "n3"]
    assert plan["breaker"]["why"] == ("4 of 5 nodes could not be judged (error or unreachable), more than 50%: "
                                      "the checker is suspect, not the nodes")
    assert all("not drained: circuit breaker: 4 of 5 nodes" in entry["why"] for entry in plan["leave"])
    assert slurm.plan_lines(plan)[0].startswith("BREAKER: 4 of 5 nodes could not be judged")
    assert plan["brake"]["tripped"] is False  # the breaker holds the drains; the brake has nothing to stop


def test_breaker_most_nodes_failing_the_same_check_drains_nothing_but_resumes():
    # A driver_min set above what the fleet runs: driver.version FAILs on 3 of 4; n3 was drained by hydra and passes now.
    outcomes, nodes = _fleet([("failed", ["driver.version"])] * 3 + [("healthy", [])])
    nodes["n3"] = node("IDLE+DRAIN", "hydra: gpu.ecc_errors")
    plan = slurm.plan(outcomes, nodes, {"max_fraction": 1})
    assert plan["drain"] == [] and [r["node"] for r in plan["resume"]] == ["n3"]
    assert plan["breaker"]["check_id"] == "driver.version"
    assert plan["breaker"]["why"] == "3 of 4 nodes fail the same check driver.version, more than 50%: the checker is suspect, not the nodes"


@pytest.mark.parametrize("statuses, policy, tripped", [
    ([("failed", ["a.b"])] * 2, {}, False),                                          # 2 nodes: under breaker_min_nodes
    ([("failed", ["a.b"])] * 3 + [("healthy", [])] * 3, {}, False),                  # 3 of 6 is not more than half
    ([("failed", ["a.b"])] * 4 + [("healthy", [])] * 3, {}, True),                   # 4 of 7 is
    ([("failed", ["a.b"]), ("failed", ["c.d"]), ("failed", ["e.f"]), ("healthy", [])], {}, False),  # different checks
    ([("unreachable", [])] * 3 + [("failed", ["a.b"])], {}, True),                   # most could not be reached
    ([("error", ["x.y"])] * 3 + [("unknown", [])] * 5, {}, True),                    # no doctor run: not counted
    ([("error", ["x.y"])] * 3, {"breaker_share": 1}, False),                         # turned off
    ([("failed", ["a.b"])] * 2 + [("healthy", [])], {"breaker_min_nodes": 2}, True),
])
def test_breaker_share_and_least_nodes(statuses, policy, tripped):
    outcomes, nodes = _fleet(statuses)
    assert slurm.plan(outcomes, nodes, dict({"max_fraction": 1, "max_count": 100}, **policy))["breaker"]["tripped"] is tripped


def test_unreachable_policy():
    nodes = {"n1": node("IDLE"), "n2": node("IDLE+DRAIN", "hydra: gpu.ecc_errors"), "n3": node("IDLE"), "n4": node("IDLE")}
    outcomes = {"n1": outcome("unreachable"), "n2": outcome("unreachable"), "n3": outcome("healthy"), "n4": outcome("healthy")}
    ignored = slurm.plan(outcomes, nodes)
    # Never resumed while unreachable, never drained with the default policy.
    assert ignored["drain"] == [] and ignored["resume"] == []
    assert "unreachable policy is 'ignore'" in [e for e in ignored["leave"] if e["node"] == "n1"][0]["why"]
    drained = slurm.plan(outcomes, nodes, {"unreachable": "drain"})
    assert [(d["node"], d["reason"]) for d in drained["drain"]] == [("n1", "hydra: unreachable")]


def test_node_name_mapping_and_unknown_nodes():
    nodes = {"a01": node("IDLE")}
    plan = slurm.plan({"gpu-a01.example.com": outcome("failed", "x.y"), "gpu-zz": outcome("failed", "x.y")},
                      nodes, {"node_names": {"gpu-a01.example.com": "a01"}, "max_fraction": 1})
    assert [(d["node"], d["host"]) for d in plan["drain"]] == [("a01", "gpu-a01.example.com")]
    assert plan["leave"] == [{"node": "gpu-zz", "host": "gpu-zz",
                              "why": "slurmctld knows no node 'gpu-zz' (map it with node_names)"}]
    # Unknown nodes are not counted in the brake's denominator.
    assert plan["brake"]["node_count"] == 1


@pytest.mark.parametrize("drains, total, policy, tripped", [
    (1, 4, {}, False),                       # 25 % is not past 25 %
    (2, 4, {}, True),                        # 50 % > 25 %
    (2, 4, {"max_fraction": 0.5}, False),
    (11, 100, {}, True),                     # 11 > max_count 10
    (10, 100, {}, False),
    (1, 4, {"max_count": 0}, True),
    (0, 0, {"max_count": 0, "max_fraction": 0}, False),
])
def test_brake(drains, total, policy, tripped):
    nodes = dict(("n%d" % i, node("IDLE")) for i in range(total))
    outcomes = dict(("n%d" % i, outcome("failed" if i < drains else "healthy", "gpu.ecc_errors")) for i in range(total))
    plan = slurm.plan(outcomes, nodes, policy)
    assert plan["brake"]["tripped"] is tripped
    assert plan["brake"]["drain_count"] == drains
    assert bool(plan["brake"]["why"]) is tripped


def test_brake_reason_names_the_cap():
    nodes = {"n1": node("IDLE"), "n2": node("IDLE")}
    plan = slurm.plan({"n1": outcome("failed", "a.b"), "n2": outcome("failed", "a.b")}, nodes)
    assert plan["brake"]["why"] == "would drain 2 of 2 nodes (100%), more than max_fraction 0.25 (25%)"
    assert slurm.plan_lines(plan)[0].startswith("BRAKE: would drain 2 of 2 nodes")


def test_drain_reason_is_bounded_and_says_what_was_cut():
    ids = ["gpu.check_number_%02d" % i for i in range(20)]
    reason = slurm.drain_reason(ids)
    assert len(reason) <= slurm.MAX_REASON_CHARS
    assert reason.startswith("hydra: gpu.check_number_00,")
    kept = reason[len("hydra: "):].split(" +")[0].split(",")
    assert reason.endswith(" +%d more" % (20 - len(kept)))
    assert slurm.drain_reason(["b.y", "a.x", "a.x"]) == "hydra: a.x,b.y"


@pytest.mark.parametrize("policy, message", [
    ({"drain_on": ["failed", "healthy"]}, "drain_on: 'healthy' is not a doctor outcome that can drain; accepted: failed, error, warning"),
    ({"drain_on": "failed"}, "drain_on: 'failed' is not a doctor outcome that can drain"),
    ({"unreachable": "resume"}, "unreachable: 'resume' is not a policy; accepted: ignore, drain"),
    ({"max_fraction": 1.5}, "max_fraction: 1.5 is not a fraction between 0 and 1"),
    ({"max_count": -1}, "max_count: -1 is not a whole number >= 0"),
    ({"max_cnt": 3}, "policy: unknown key 'max_cnt'"),
    ({"breaker_share": 0}, "breaker_share: 0 is not a fraction above 0 and at most 1 (1 turns the breaker off)"),
    ({"breaker_min_nodes": 0}, "breaker_min_nodes: 0 is not a whole number >= 1"),
])
def test_bad_policy_is_one_clear_line(policy, message):
    with pytest.raises(slurm.GateInputError) as err:
        slurm.plan({}, {}, policy)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_bad_outcome_status_is_rejected():
    with pytest.raises(slurm.GateInputError, match=r"outcomes.n1.status: 'broken' is not one of healthy, warning"):
        slurm.plan({"n1": {"status": "broken"}}, {"n1": node("IDLE")})


def test_unverified_names_nodes_whose_state_did_not_follow():
    plan = {"drain": [{"node": "n1"}], "resume": [{"node": "n2"}]}
    assert slurm.unverified(plan, {"n1": node("IDLE+DRAIN", "hydra: a.b"), "n2": node("IDLE+NOT_RESPONDING")}) == []
    problems = slurm.unverified(plan, {"n1": node("IDLE+DRAIN", "admin"), "n2": node("IDLE+DRAIN", "hydra: a.b")})
    assert [p[0] for p in problems] == ["n1", "n2"]


@pytest.mark.parametrize("action, now, why", [
    ("resume", node("IDLE+DRAIN", "hydra: gpu.ecc_errors"), None),
    ("resume", node("IDLE+DRAIN", "admin: fan swap"), "drained by someone else since the plan (admin: fan swap): not resumed"),
    ("resume", node("IDLE+DRAIN", "hydra: gpu.xid_errors: XID 79"),
     "drained again by hydra since the plan (hydra: gpu.xid_errors: XID 79, was hydra: gpu.ecc_errors): not resumed"),
    ("resume", node("IDLE"), "no longer drained (IDLE): nothing to resume"),
    ("resume", None, "could not re-read it before the change (no such node): not resumed"),
    ("drain", node("IDLE"), None),
    ("drain", node("DOWN", "hydra: unreachable"), None),
    ("drain", node("IDLE+DRAIN", "admin: bad DIMM"), "drained by someone else since the plan (admin: bad DIMM): not drained"),
    ("drain", node("MIXED+DRAIN", "hydra: gpu.nvlink"), "drained by hydra since the plan (hydra: gpu.nvlink): not drained"),
])
def test_each_node_is_judged_again_right_before_its_change(action, now, why):
    # Issue 23: an admin drain between the plan and the change was lifted (resume) or overwritten (drain).
    entry = {"node": "node1", "host": "gpu-a", "reason": "hydra: gpu.ecc_errors", "why": "doctor healthy now"}
    assert slurm.changed_since_plan(entry, action, now) == why

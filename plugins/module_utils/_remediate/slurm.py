# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The SLURM partition gate: parse node states, plan drains and resumes, judge the brake.

Pure functions, and at the end the SlurmGateWorker that the slurm_gate_apply module hands to the remediation
lifecycle (apply.run), which does the I/O through scontrol.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host import command
from ansible_collections.continuum.hydra.plugins.module_utils._host.slurm import (
    MAX_REASON_CHARS,
    REASON_PREFIX,
    Node,
    drain_args,
    is_hydra_reason,
    parse_show_node,
    resume_args,
)
from ansible_collections.continuum.hydra.plugins.module_utils._remediate import apply
from ansible_collections.continuum.hydra.plugins.module_utils._remediate.apply import Failure, Worker
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERRORED as ERROR
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAILED, HEALTHY, UNKNOWN, UNREACHABLE, WARNING

UNREACHABLE_REASON = REASON_PREFIX + " unreachable"
OUTCOMES = (HEALTHY, WARNING, FAILED, ERROR, UNREACHABLE, UNKNOWN)
DRAINABLE_OUTCOMES = (FAILED, ERROR, WARNING)
UNREACHABLE_POLICIES = ("ignore", "drain")

# The circuit breaker (breaker()): when more than this share of the judged nodes could not be judged (ERROR, or
# unreachable), or FAIL the same check - and at least BREAKER_MIN_NODES of them - the checker is the likelier culprit
# than the nodes (a DCGM host engine down, an NFS hang, a driver install broken across the fleet, a wrong expectation)
# and the gate drains nothing. Half, as NVSentinel's breaker (50 % of the GPU nodes by default, docs "Circuit
# Breaker"): a real fault of hardware takes some nodes, rarely most of them. Fewer than three nodes failing alike are
# within what one shared cause of hardware does to a small partition (two nodes behind one bad switch).
BREAKER_SHARE = 0.5
BREAKER_MIN_NODES = 3

# The policy key UNREACHABLE (the option of that name) says what to do with the nodes of unreachable hosts.
# "error" means "could not judge": it drains only when asked (a checker outage must not drain healthy nodes).
DEFAULT_POLICY: dict[str, Any] = {
    "drain_on": [FAILED],
    UNREACHABLE: "ignore",
    "max_fraction": 0.25,
    "max_count": 10,
    "node_names": {},
    "breaker_share": BREAKER_SHARE,
    "breaker_min_nodes": BREAKER_MIN_NODES,
}

GatePlan = dict[str, Any]  # plan(): {drain, resume, leave, brake}


class GateInputError(ValueError):
    """Bad gate input: one line naming the bad value and what is accepted."""


def drain_reason(check_ids: list[str], proof: Optional[str] = None) -> str:
    """`hydra: id1,id2` cut to MAX_REASON_CHARS, saying how many ids were left out; then the outcome's proof (the
    fabric test's rounds, figure and partner: 'hydra: fabric.collective rounds 2,4: 0.003<0.02 GB/s with n7') as far
    as it fits."""
    ids = sorted(set(check_ids)) or ["no failing check id reported"]
    reason = "%s %s" % (REASON_PREFIX, ",".join(ids))
    if len(reason) <= MAX_REASON_CHARS:
        if proof:
            reason = ("%s %s" % (reason, " ".join(str(proof).split())))[:MAX_REASON_CHARS]
        return reason
    kept: list[str] = []
    for index, check_id in enumerate(ids):
        suffix = " +%d more" % (len(ids) - index - 1) if index < len(ids) - 1 else ""
        candidate = "%s %s%s" % (REASON_PREFIX, ",".join(kept + [check_id]), suffix)
        if len(candidate) > MAX_REASON_CHARS:
            break
        kept.append(check_id)
    return "%s %s +%d more" % (REASON_PREFIX, ",".join(kept), len(ids) - len(kept))


def normalize_policy(policy: Optional[dict[str, Any]]) -> dict[str, Any]:
    """Policy with defaults filled in; GateInputError naming the first bad value."""
    merged = dict(DEFAULT_POLICY)
    merged.update(dict((k, v) for k, v in (policy or {}).items() if v is not None))
    unknown = sorted(set(merged) - set(DEFAULT_POLICY))
    if unknown:
        raise GateInputError("policy: unknown key %r; accepted: %s" % (unknown[0], ", ".join(sorted(DEFAULT_POLICY))))
    drain_on = merged["drain_on"]
    bad = [s for s in drain_on if s not in DRAINABLE_OUTCOMES] if isinstance(drain_on, (list, tuple)) else [drain_on]
    if bad:
        raise GateInputError("drain_on: %r is not a doctor outcome that can drain; accepted: %s"
                             % (bad[0], ", ".join(DRAINABLE_OUTCOMES)))
    if merged[UNREACHABLE] not in UNREACHABLE_POLICIES:
        raise GateInputError("%s: %r is not a policy; accepted: %s"
                             % (UNREACHABLE, merged[UNREACHABLE], ", ".join(UNREACHABLE_POLICIES)))
    fraction = merged["max_fraction"]
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
        raise GateInputError("max_fraction: %r is not a fraction between 0 and 1" % (fraction,))
    count = merged["max_count"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise GateInputError("max_count: %r is not a whole number >= 0" % (count,))
    share = merged["breaker_share"]
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise GateInputError("breaker_share: %r is not a fraction above 0 and at most 1 (1 turns the breaker off)" % (share,))
    least = merged["breaker_min_nodes"]
    if isinstance(least, bool) or not isinstance(least, int) or least < 1:
        raise GateInputError("breaker_min_nodes: %r is not a whole number >= 1" % (least,))
    if not isinstance(merged["node_names"], dict):
        raise GateInputError("node_names: %r is not a mapping of inventory host to SLURM node name" % (merged["node_names"],))
    return merged


def _validate_outcomes(outcomes: Any) -> None:
    if not isinstance(outcomes, dict):
        raise GateInputError("outcomes: %r is not a mapping of host to doctor outcome" % (outcomes,))
    for host, outcome in outcomes.items():
        status = outcome.get("status") if isinstance(outcome, dict) else None
        if status not in OUTCOMES:
            raise GateInputError("outcomes.%s.status: %r is not one of %s" % (host, status, ", ".join(OUTCOMES)))


def breaker(outcomes: dict[str, Any], share: float = BREAKER_SHARE, min_nodes: int = BREAKER_MIN_NODES) -> dict[str, Any]:
    """Whether the checker, rather than the nodes, is the likelier culprit of this run's verdicts. Pure.

    outcomes: as plan()'s (for the report: its hosts, which carry the same status and failing_checks). The judged
    nodes are those with a verdict or unreachable (UNKNOWN ones had no doctor run). Tripped when more than ``share``
    of them, and at least ``min_nodes``, could not be judged (ERROR or unreachable), or list the same failing check.
    Returns {tripped, why, share, min_nodes, node_count, unjudged: [hosts], check_id, hosts: [the hosts it names]}.
    """
    judged = sorted(host for host, outcome in outcomes.items() if outcome.get("status") in OUTCOMES and outcome["status"] != UNKNOWN)
    unjudged = [host for host in judged if outcomes[host]["status"] in (ERROR, UNREACHABLE)]
    by_check: dict[str, list[str]] = {}
    for host in judged:
        if outcomes[host]["status"] in (FAILED, ERROR):
            for check_id in sorted(set(outcomes[host].get("failing_checks") or [])):
                by_check.setdefault(check_id, []).append(host)
    out: dict[str, Any] = {"tripped": False, "why": None, "share": share, "min_nodes": min_nodes, "node_count": len(judged),
                           "unjudged": unjudged, "check_id": None, "hosts": []}

    def over(hosts: list[str]) -> bool:
        return len(hosts) >= min_nodes and len(hosts) > share * len(judged)
    common = sorted(((check_id, hosts) for check_id, hosts in by_check.items() if over(hosts)), key=lambda kv: (-len(kv[1]), kv[0]))
    if over(unjudged):
        out.update(tripped=True, hosts=unjudged, why="%d of %d nodes could not be judged (error or unreachable), more "
                   "than %g%%: the checker is suspect, not the nodes" % (len(unjudged), len(judged), share * 100))
    elif common:
        check_id, hosts = common[0]
        out.update(tripped=True, hosts=hosts, check_id=check_id, why="%d of %d nodes fail the same check %s, more than "
                   "%g%%: the checker is suspect, not the nodes" % (len(hosts), len(judged), check_id, share * 100))
    return out


def plan(outcomes: dict[str, Any], nodes: dict[str, Node], policy: Optional[dict[str, Any]] = None) -> GatePlan:
    """What the gate would do. Pure: outcomes x SLURM node states x policy -> plan.

    outcomes: {inventory_host: {"status": one of OUTCOMES, "failing_checks": [ids], "message": str}}
    nodes:    parse_show_node() output
    Returns {"drain": [{node, host, reason, why}], "resume": [{node, host, reason, why}],
             "leave": [{node, host, why}], "brake": {...}, "breaker": breaker()}. The breaker is judged on the
    outcomes first: tripped, the plan drains nothing (each node it would have drained is left, saying why) and still
    resumes the nodes that pass. The brake is judged on the whole plan, before anything changes, and a tripped brake
    means nothing is to be done at all.
    """
    _validate_outcomes(outcomes)
    policy = normalize_policy(policy)
    tripped = breaker(dict((host, outcome) for host, outcome in outcomes.items()
                           if policy["node_names"].get(host, host) in nodes),
                      policy["breaker_share"], policy["breaker_min_nodes"])
    drain, resume, leave = [], [], []
    judged = 0
    for host in sorted(outcomes):
        outcome = outcomes[host]
        node = policy["node_names"].get(host, host)
        status = outcome["status"]
        if node not in nodes:
            leave.append({"node": node, "host": host, "why": "slurmctld knows no node %r (map it with node_names)" % node})
            continue
        judged += 1
        current = nodes[node]
        reason = current["reason"]
        failing = sorted(set(outcome.get("failing_checks") or []))
        wants_drain = status in policy["drain_on"] or (status == UNREACHABLE and policy[UNREACHABLE] == "drain")
        if wants_drain:
            new_reason = UNREACHABLE_REASON if status == UNREACHABLE else drain_reason(failing, outcome.get("proof"))
            if current["drained"]:
                owner = "hydra" if is_hydra_reason(reason) else "an admin"
                leave.append({"node": node, "host": host,
                              "why": "%s, already drained by %s (%s)" % (status, owner, reason or "no reason")})
            elif tripped["tripped"]:
                leave.append({"node": node, "host": host, "why": "%s, not drained: circuit breaker: %s" % (status, tripped["why"])})
            else:
                why = "doctor could not reach the host" if status == UNREACHABLE else \
                    "doctor %s: %s" % (status, ", ".join(failing) or outcome.get("message") or "no check id")
                drain.append({"node": node, "host": host, "reason": new_reason, "why": why})
        elif status == ERROR:
            # Could not judge: a drain hydra wrote stays (the GPU behind an Xid drain may be what makes nvidia-smi
            # time out now), and an outage of the checker resumes nothing.
            leave.append({"node": node, "host": host, "why": "doctor error (%s): could not judge, state kept (%s)" % (
                ", ".join(failing) or outcome.get("message") or "no check id",
                ", ".join(part for part in (current["state"], reason) if part))})
        elif status in (UNREACHABLE, UNKNOWN):
            leave.append({"node": node, "host": host, "why": "%s (%s): not judged, state kept%s" % (
                status, outcome.get("message") or "no doctor result",
                " (unreachable policy is 'ignore')" if status == UNREACHABLE else "")})
        elif current["drained"] and is_hydra_reason(reason):
            resume.append({"node": node, "host": host, "reason": reason, "why": "doctor %s now; drained by hydra" % status})
        elif current["drained"]:
            leave.append({"node": node, "host": host,
                          "why": "doctor %s, but drained by an admin (%s): hydra never resumes it" % (status, reason or "no reason")})
        else:
            leave.append({"node": node, "host": host, "why": "doctor %s, in service (%s)" % (status, current["state"])})
    return {"drain": drain, "resume": resume, "leave": leave, "brake": brake(len(drain), judged, policy), "breaker": tripped}


def brake(drain_count: int, node_count: int, policy: dict[str, Any]) -> dict[str, Any]:
    """Tripped when this run would drain more than max_count nodes or more than max_fraction of the judged nodes."""
    fraction = (float(drain_count) / node_count) if node_count else 0.0
    why = None
    if drain_count > policy["max_count"]:
        why = "would drain %d nodes, more than max_count %d" % (drain_count, policy["max_count"])
    elif fraction > policy["max_fraction"]:
        why = "would drain %d of %d nodes (%.0f%%), more than max_fraction %g (%.0f%%)" % (
            drain_count, node_count, fraction * 100, policy["max_fraction"], policy["max_fraction"] * 100)
    return {"tripped": why is not None, "why": why, "drain_count": drain_count, "node_count": node_count,
            "max_count": policy["max_count"], "max_fraction": policy["max_fraction"]}


def changed_since_plan(entry: dict[str, Any], action: str, now: Optional[Node], error: Optional[str] = None) -> Optional[str]:
    """Why the planned ``action`` ("drain" or "resume") of ``entry``'s node must not be carried out, judged on the node
    as it is right before the change (``now``: parse_show_node() of that node; None, with ``error``, when it could not
    be read); None when it still can. An admin may drain a node between the plan and the change: hydra never lifts
    nor replaces a drain it did not write, and resumes only the very drain it planned to resume."""
    if now is None:
        return "could not re-read it before the change (%s): not %s" % (error or "no such node", "resumed" if action == "resume" else "drained")
    reason = now["reason"]
    if action == "drain":
        if now["drained"]:
            owner = "hydra" if is_hydra_reason(reason) else "someone else"
            return "drained by %s since the plan (%s): not drained" % (owner, reason or "no reason")
        return None
    if not now["drained"]:
        return "no longer drained (%s): nothing to resume" % now["state"]
    if not is_hydra_reason(reason):
        return "drained by someone else since the plan (%s): not resumed" % (reason or "no reason")
    if reason != entry["reason"]:
        return "drained again by hydra since the plan (%s, was %s): not resumed" % (reason, entry["reason"])
    return None


def plan_lines(gate_plan: GatePlan) -> list[str]:
    """The plan as one line per node, for people reading a check-mode run."""
    lines = []
    if (gate_plan.get("breaker") or {}).get("tripped"):
        lines.append("BREAKER: %s; nothing will be drained" % gate_plan["breaker"]["why"])
    if gate_plan["brake"]["tripped"]:
        lines.append("BRAKE: %s; nothing will be changed" % gate_plan["brake"]["why"])
    lines.extend("drain  %s (%s): %s -> reason %r" % (d["node"], d["host"], d["why"], d["reason"]) for d in gate_plan["drain"])
    lines.extend("resume %s (%s): %s (was %r)" % (r["node"], r["host"], r["why"], r["reason"]) for r in gate_plan["resume"])
    lines.extend("leave  %s (%s): %s" % (entry["node"], entry["host"], entry["why"]) for entry in gate_plan["leave"])
    return lines


def unverified(gate_plan: GatePlan, nodes_after: dict[str, Node]) -> list[tuple[str, str]]:
    """Nodes whose state after the run is not what the plan did: [(node, what is wrong)]."""
    problems = []
    for entry in gate_plan["drain"]:
        after = nodes_after.get(entry["node"])
        if not after or not after["drained"] or not is_hydra_reason(after["reason"]):
            problems.append((entry["node"], "not drained with a hydra reason (state %s)" % (after or {}).get("state")))
    for entry in gate_plan["resume"]:
        after = nodes_after.get(entry["node"])
        if not after or after["drained"]:
            problems.append((entry["node"], "still drained (state %s)" % (after or {}).get("state")))
    return problems


# ---- the worker: scontrol, for apply.run --------------------------------------------------------------------

def predicted(gate_plan: GatePlan, before: dict[str, Node]) -> dict[str, Node]:
    """Node states as the plan leaves them, for check mode's diff."""
    after = {name: dict(state) for name, state in before.items()}
    for entry in gate_plan["drain"]:
        after[entry["node"]].update(state=after[entry["node"]]["state"] + "+DRAIN", drained=True, reason=entry["reason"])
    for entry in gate_plan["resume"]:
        base = after[entry["node"]]["state"].split("+")[0]
        after[entry["node"]].update(state=base, drained=False, reason=None)
    return after


def diff_of(gate_plan: GatePlan, before: dict[str, Node], after: dict[str, Node]) -> dict[str, Any]:
    """State and reason, before and after, of every node the plan drains or resumes."""
    def view(nodes: dict[str, Node], node: str) -> dict[str, Any]:
        state = nodes.get(node) or {}
        return {"state": state.get("state"), "reason": state.get("reason")}
    touched = [e["node"] for e in gate_plan["drain"] + gate_plan["resume"]]
    return {"before": {n: view(before, n) for n in touched}, "after": {n: view(after, n) for n in touched}}


class SlurmGateWorker(Worker):
    """State: parse_show_node() of every node. Plan: plan() of the outcomes given; a tripped brake refuses."""

    name = "slurm_gate"
    errors = (GateInputError,)
    # After `state=resume` slurmctld reports IDLE+NOT_RESPONDING for about a second; the DRAIN flag is gone at once,
    # but a few reads are allowed before calling the change unverified.
    verify_reads = 10
    verify_pause_s = 0.5

    def __init__(self, module: Any) -> None:
        super().__init__(module)
        params = self.params
        if params["slurm_conf"] and not os.path.isfile(params["slurm_conf"]):
            raise Failure("slurm_conf: %s is not a file" % params["slurm_conf"])
        self.policy = {key: params[key] for key in DEFAULT_POLICY}
        scontrol = command.find_binary("scontrol", params["scontrol_path"])
        if not scontrol:
            raise Failure("scontrol: not found (%s); install the SLURM client or set scontrol_path"
                          % (params["scontrol_path"] or "not on PATH"))
        self.scontrol: str = scontrol
        self.env = {"SLURM_CONF": params["slurm_conf"]} if params["slurm_conf"] else {}
        self.timeout: int = params["timeout"]

    def scontrol_call(self, args: list[str]) -> str:
        argv = [self.scontrol] + args
        try:
            rc, out, err = command.run(argv, self.timeout, env=self.env)
        except (command.ProbeError, command.ProbeAbsent) as exc:
            raise Failure(str(exc)) from exc
        if rc != 0:
            raise Failure("%s failed (rc %d): %s" % (" ".join(argv), rc, (err or out).strip()), rc=rc)
        return out

    def read(self) -> dict[str, Node]:
        return parse_show_node(self.scontrol_call(["show", "node", "-o"]))

    def read_node(self, node: str) -> tuple[Optional[Node], Optional[str]]:
        """One node as slurmctld has it now: (its state, None), or (None, why it could not be read)."""
        try:
            return parse_show_node(self.scontrol_call(["show", "node", node, "-o"])).get(node), None
        except Failure as exc:
            return None, exc.msg

    def plan(self, before: dict[str, Node]) -> GatePlan:
        gate_plan = plan(self.params["outcomes"], before, self.policy)
        if gate_plan["brake"]["tripped"]:
            raise Failure("slurm_gate brake: %s; nothing was changed" % gate_plan["brake"]["why"],
                          plan=gate_plan, plan_lines=plan_lines(gate_plan), changed=False)
        return gate_plan

    def changed(self, plan: GatePlan) -> bool:
        return bool(plan["drain"] or plan["resume"])

    def apply(self, plan: GatePlan) -> GatePlan:
        """Each node re-read right before its change (changed_since_plan): what an admin did since the plan stands.
        Returns what was done; a node no longer to change is in ``leave`` with why. (SLURM has no compare-and-set:
        what remains is the instant between this read and the update.)"""
        done: GatePlan = {"drain": [], "resume": [], "leave": list(plan["leave"]), "brake": plan["brake"],
                          "breaker": plan.get("breaker")}
        for action, args_of in (("drain", lambda e: drain_args(e["node"], e["reason"])), ("resume", lambda e: resume_args(e["node"]))):
            for entry in plan[action]:
                now, error = self.read_node(entry["node"])
                why = changed_since_plan(entry, action, now, error)
                if why:
                    done["leave"].append({"node": entry["node"], "host": entry["host"], "why": why})
                    continue
                self.scontrol_call(args_of(entry))
                done[action].append(entry)
        return done

    def verify(self, done: GatePlan, after: dict[str, Node]) -> list[str]:
        return ["%s %s" % problem for problem in unverified(done, after)]

    def predict(self, before: dict[str, Node], plan: GatePlan) -> dict[str, Node]:
        return predicted(plan, before)

    def diff(self, plan: GatePlan, before: dict[str, Node], after: dict[str, Node]) -> dict[str, Any]:
        return diff_of(plan, before, after)

    def result(self, plan: GatePlan, before: dict[str, Node], after: dict[str, Node], applied: bool) -> dict[str, Any]:
        return {"plan": plan, "plan_lines": plan_lines(plan), "nodes": after if applied else before}


def deadline_s(call_timeout_s: float, nodes: int) -> float:
    """The most a gate run over ``nodes`` nodes takes: one ``scontrol show node`` per read, and per node its re-read
    right before the change (SlurmGateWorker.apply) and the drain or resume: two calls."""
    return apply.deadline_s(SlurmGateWorker, call_timeout_s, 1, 2 * nodes)

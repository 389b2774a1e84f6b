# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Which hosts run a collective together, round by round, and what the rounds prove (controller side, pure).

The state is a plain dict (it travels between rounds as an Ansible variable): the hosts in inventory order, each
host's floor, every round's groups with their figures and verdicts, and what is proven: good hosts, named bad
hosts, named bad links, hosts in ERROR. ``next_round`` plans from it; ``record`` judges a round's results.

**Judging a group.** A group *passes* when its bus bandwidth at the largest size reaches its floor and every rank's
result was exact. The floor is absolute where the inventory sets ``fabric_busbw_gbps_min`` (the lowest of the
members' values), else relative: (1 - margin) x the reference, the best complete group of the first round whose
groups can be compared (the screening round of disjoint pairs, all running at once). A group that could not
finish (a rank did not join or was lost) is *incomplete*: those ranks' hosts are in ERROR, the others are not
judged by it and are tested again.

**Proof.** A passing group proves its hosts good and its ring links (each member to the next, the last to the
first) good. A host is *named* bad when it is the only member not proven good of at least ``confirmations`` (2)
failing groups - e.g. the failing half it was narrowed to, and then the pair with a proven-good host; a link is
named when a failing group's hosts are all proven good and that link is its only unproven one.

**Busy hosts.** A host the idle guard found busy before the first round (a GPU compute process, a SLURM job holding
it: _host/idle.py, read by the fabric module's ``mode: idle``) is absent by choice: it is in no group, its partners
are judged without it, and its checks SKIP naming what held it ("not tested: node busy (...)"), never PASS or ERROR.

**Rounds.** Disjoint groups of a round run at the same time.

- bisect (the default): round 1 is every host in one ring - with an absolute floor that is the whole answer
  when it passes. Without one, round 1 screens disjoint pairs (a triple when odd) to set the reference, and
  round 2 is the whole ring. After that each failing group's unproven hosts are split in halves, and the halves
  of every failing group run at the same time; a half of one host is padded with a proven-good host. A failing
  group whose hosts all pass elsewhere is probed across the cut: its unproven ring links as pairs.
- pairwise (small groups, up to ``pairwise_max`` hosts, or asked for): every pair once, in disjoint pairs per
  round (the circle schedule: N-1 rounds, N when odd).

**Bounds** (tests/unit/plugins/plugin_utils/_fleet/test_fabric.py checks them on a simulated fabric for every
placement of one and two bad hosts among 3..16, under noise): one bad host of N >= 3 is named within
ceil(log2 N) + 2 rounds; two bad hosts within ceil(log2 N) + 3 (they are split in parallel; one more round when
they share the last half and need a confirmation). Two hosts alone cannot be told apart: both are reported.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding
from ansible_collections.continuum.hydra.plugins.module_utils._status import (
    ERROR,
    FAIL,
    GROUP_BELOW,
    GROUP_INCOMPLETE,
    GROUP_PASSED,
    GROUP_UNJUDGED,
    PASS,
    RANK_OK,
    SKIP,
    UNREACHABLE,
    WARN,
)
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import evidence

STATE_VERSION = 1
BISECT = "bisect"
PAIRWISE = "pairwise"
MODES = ("auto", BISECT, PAIRWISE)

# Why a group was planned (the report and the HTML picture name it).
WHOLE = "whole"
SCREEN = "screen"
HALF = "half"
SOLO = "solo"  # one suspect with a proven-good host
RETEST = "retest"  # hosts whose earlier group did not finish
CROSS = "cross"  # a link of a failing group whose hosts all passed elsewhere
PAIR = "pair"  # pairwise mode
PURPOSES = (WHOLE, SCREEN, HALF, SOLO, RETEST, CROSS, PAIR)

DEFAULTS: dict[str, Any] = {"mode": "auto", "pairwise_max": 4, "relative_margin": 0.25, "confirmations": 2,
                            "max_rounds": None}
CHECK_COLLECTIVE = "fabric.collective"
CHECK_LINK = "fabric.link"
CHECK_IDS = (CHECK_COLLECTIVE, CHECK_LINK)
REMEDIATION_HOST = ("Drain the node; check its fabric NIC (link speed and errors: ethtool -S, ibstat, "
                    "mlxlink), cable and switch port; re-run playbooks/fabric.yml after the fix.")
REMEDIATION_ERROR = ("The rank could not take part: check that the host answers on its fabric address and the ports "
                     "in docs/fabric.md are open, then re-run playbooks/fabric.yml.")
REMEDIATION_LINK = "Both hosts pass with others: check the switch path between them (ports, uplinks, cabling)."
NOT_TESTED_BUSY = "not tested"  # a busy host's checks: "not tested: node busy (...); force: true loads it anyway"


class FabricPlanError(ValueError):
    """Bad planner input: one line naming the value and what is accepted."""


def bound_one(count: int) -> int:
    """Rounds within which one bad host of ``count`` is named (stated and tested): ceil(log2 N) + 2."""
    return math.ceil(math.log2(max(count, 2))) + 2


def bound_two(count: int) -> int:
    """Rounds within which two bad hosts of ``count`` are both named: ceil(log2 N) + 3."""
    return bound_one(count) + 1


def max_rounds(count: int, mode: str) -> int:
    """The playbook's loop bound: the k-bad bound with room for one retest after a rank in ERROR."""
    if count < 2:
        return 0
    if mode == PAIRWISE:
        return (count if count % 2 else count - 1) + 2
    return bound_two(count) + 2


def _options(given: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    options = dict(DEFAULTS)
    options.update({k: v for k, v in (given or {}).items() if v is not None})
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise FabricPlanError("fabric options: unknown %r; accepted: %s" % (unknown[0], ", ".join(sorted(DEFAULTS))))
    if options["mode"] not in MODES:
        raise FabricPlanError("mode: %r is not one of %s" % (options["mode"], ", ".join(MODES)))
    margin = options["relative_margin"]
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 < margin < 1:
        raise FabricPlanError("relative_margin: %r is not a fraction between 0 and 1" % (margin,))
    for name, lowest in (("pairwise_max", 2), ("confirmations", 1)):
        value = options[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
            raise FabricPlanError("%s: %r is not a whole number >= %d" % (name, value, lowest))
    if options["max_rounds"] is not None and (isinstance(options["max_rounds"], bool) or not isinstance(options["max_rounds"], int)
                                              or options["max_rounds"] < 1):
        raise FabricPlanError("max_rounds: %r is not a whole number >= 1" % (options["max_rounds"],))
    return options


def floor_of(expect: Optional[Mapping[str, Any]]) -> Optional[float]:
    """A host's absolute floor from its hydra_expect (None: unset)."""
    if expect is not None and not isinstance(expect, Mapping):
        raise FabricPlanError("hydra_expect: %r is not a mapping" % (expect,))
    return _expect.get(expect, "fabric_busbw_gbps_min")


def _idle_reasons(name: str, given: Optional[Mapping[str, Any]], hosts: Sequence[str]) -> dict[str, str]:
    """busy / forced: host -> the idle guard's one line, in inventory order; a host not in ``hosts`` is named."""
    given = given or {}
    unknown = sorted(str(host) for host in given if host not in hosts)
    if unknown:
        raise FabricPlanError("%s: %r is not one of the hosts" % (name, unknown[0]))
    for host, reason in given.items():
        if not isinstance(reason, str) or not reason:
            raise FabricPlanError("%s: %s: %r is not the idle guard's reason (a line of text)" % (name, host, reason))
    return dict((host, str(given[host])) for host in hosts if host in given)


def start(hosts: Sequence[str], floors: Optional[Mapping[str, Optional[float]]] = None,
          options: Optional[Mapping[str, Any]] = None, busy: Optional[Mapping[str, str]] = None,
          forced: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """A new state for these hosts (inventory order is ring order); floors: host -> fabric_busbw_gbps_min or None.

    busy: host -> why the idle guard refused it (those hosts are left out of every round, absent by choice); forced:
    host -> what ``force`` overrode on a host that is tested anyway (named in its check)."""
    if len(set(hosts)) != len(hosts):
        raise FabricPlanError("hosts: %r lists a host twice" % (list(hosts),))
    held = _idle_reasons("busy", busy, hosts)
    loaded = _idle_reasons("forced", forced, hosts)
    opts = _options(options)
    floor_of: dict[str, Optional[float]] = {}
    for host in hosts:
        value = (floors or {}).get(host)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise FabricPlanError("%s: fabric_busbw_gbps_min %r is not a number of GB/s above 0" % (host, value))
        floor_of[host] = float(value) if value is not None else None
    tested = [host for host in hosts if host not in held]
    mode = opts["mode"]
    if mode == "auto":
        mode = PAIRWISE if len(tested) <= opts["pairwise_max"] else BISECT
    return {"version": STATE_VERSION, "hosts": tested, "floors": floor_of, "options": opts, "mode": mode,
            "max_rounds": opts["max_rounds"] or max_rounds(len(tested), mode), "rounds": [], "good": [], "bad": {},
            "errored": {}, "links": [], "proven_links": [], "reference_gbps": None, "done": False, "plan": None,
            "note": None, "busy": held, "forced": loaded}


# ---------------------------------------------------------------- judging a round

def _link(a: str, b: str) -> list[str]:
    return sorted((a, b))


def ring_links(members: Sequence[str]) -> list[list[str]]:
    """The links a ring over members uses: each to the next, the last to the first (one link for a pair)."""
    if len(members) < 2:
        return []
    unique: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for i in range(len(members)):
        link = _link(members[i], members[(i + 1) % len(members)])
        if tuple(link) not in seen:
            seen.add(tuple(link))
            unique.append(link)
    return unique


def group_floor(state: Mapping[str, Any], members: Iterable[str]) -> tuple[Optional[float], str]:
    """(floor in GB/s, how it was set): the lowest absolute floor of the members, else the relative one (or None)."""
    absolute = [state["floors"][m] for m in members if state["floors"].get(m) is not None]
    if absolute:
        return min(absolute), "fabric_busbw_gbps_min"
    if state.get("reference_gbps"):
        margin = state["options"]["relative_margin"]
        return state["reference_gbps"] * (1 - margin), "(1 - %g) x the reference %.6g GB/s" % (margin, state["reference_gbps"])
    return None, "no floor yet"


def record(state: dict[str, Any], outcomes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Judge the planned round from each group's outcome (group id -> group_outcome()); the state, updated."""
    plan = state.get("plan")
    if not plan:
        return state
    groups = []
    for group in plan["groups"]:
        outcome = dict(outcomes.get(group["id"]) or {"complete": False, "errors": [], "reason": "no result from any rank"})
        measured = {key: outcome.get(key) for key in ("complete", "busbw_gbps", "latency_us", "backend", "verified", "rows", "reason")}
        groups.append(dict(group, **measured, errors=list(outcome.get("errors") or [])))
    entry = {"round": plan["round"], "stage": plan["stage"], "groups": groups}
    state["rounds"].append(entry)
    state["plan"] = None
    for group in groups:
        for error in group["errors"]:
            if error["host"] not in state["errored"] and error["host"] not in state["bad"]:
                state["errored"][error["host"]] = {"round": plan["round"], "group": group["id"], "kind": error["kind"],
                                                   "reason": error["reason"]}
    if state["reference_gbps"] is None and plan["stage"] in (SCREEN, PAIR):
        # The reference: the best group of the screening round, or of the whole pairwise schedule once it is done.
        stage_groups = groups if plan["stage"] == SCREEN else [g for r in state["rounds"] if r["stage"] == PAIR for g in r["groups"]]
        complete = [g["busbw_gbps"] for g in stage_groups if g["complete"] and g.get("verified") and g.get("busbw_gbps")]
        # One group alone is no comparison: its hosts stay unjudged (two hosts without a floor cannot be judged).
        if len(complete) >= 2 and (plan["stage"] == SCREEN or _pairwise_done(state)):
            state["reference_gbps"] = max(complete)
    _judge_all(state)
    return state


def _pairwise_done(state: Mapping[str, Any]) -> bool:
    return len([r for r in state["rounds"] if r["stage"] == PAIR]) >= len(pair_schedule(state["hosts"]))


def _judge_all(state: dict[str, Any]) -> None:
    """(Re)judge every group with a figure against its floor, then derive proven hosts and links, to a fixpoint."""
    for entry in state["rounds"]:
        for group in entry["groups"]:
            if not group["complete"]:
                group["verdict"] = GROUP_INCOMPLETE
                continue
            if group.get("verdict") in (GROUP_PASSED, GROUP_BELOW):
                continue  # a verdict once given stands (the reference does not move it)
            floor, how = group_floor(state, group["members"])
            group["floor_gbps"], group["floor_from"] = (round(floor, 6) if floor is not None else None), how
            if floor is None:
                group["verdict"] = GROUP_UNJUDGED
            elif not group.get("verified"):
                group["verdict"] = GROUP_BELOW
                group["why"] = "a rank's result was not exact"
            else:
                group["verdict"] = GROUP_PASSED if group["busbw_gbps"] >= floor else GROUP_BELOW
    good: set[str] = set()
    proven: dict[tuple[str, ...], list[str]] = {}
    for entry in state["rounds"]:
        for group in entry["groups"]:
            if group["verdict"] == GROUP_PASSED:
                good.update(group["members"])
                proven.update((tuple(link), link) for link in ring_links(group["members"]))
    state["good"] = [h for h in state["hosts"] if h in good and h not in state["errored"]]
    state["proven_links"] = list(proven.values())
    _name(state)


def failing_groups(state: Mapping[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return [(entry["round"], group) for entry in state["rounds"] for group in entry["groups"] if group["verdict"] == GROUP_BELOW]


def unproven(state: Mapping[str, Any], group: Mapping[str, Any]) -> list[str]:
    settled = set(state["good"]) | set(state["errored"]) | set(state["bad"])
    return [m for m in group["members"] if m not in settled]


def _name(state: dict[str, Any]) -> None:
    """Name bad hosts (the only unproven member of enough failing groups) and bad links, until nothing changes."""
    changed = True
    while changed:
        changed = False
        evidence: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        for number, group in failing_groups(state):
            if any(m in state["bad"] or m in state["errored"] for m in group["members"]):
                continue  # explained by a named host, or not comparable
            rest = unproven(state, group)
            if len(rest) == 1:
                evidence.setdefault(rest[0], []).append((number, group))
        for host, groups in evidence.items():
            if len(groups) >= state["options"]["confirmations"] and host not in state["bad"]:
                state["bad"][host] = {"rounds": [number for number, _g in groups], "groups": [g["id"] for _n, g in groups]}
                changed = True
    link_evidence: dict[tuple[str, ...], list[tuple[int, dict[str, Any]]]] = {}
    proven = {tuple(link) for link in state["proven_links"]}
    for number, group in failing_groups(state):
        if unproven(state, group) or any(m in state["bad"] or m in state["errored"] for m in group["members"]):
            continue
        open_links = [link for link in ring_links(group["members"]) if tuple(link) not in proven]
        if len(open_links) == 1:
            link_evidence.setdefault(tuple(open_links[0]), []).append((number, group))
    for link, groups in link_evidence.items():
        if len(groups) >= state["options"]["confirmations"] and not any(entry["hosts"] == list(link) for entry in state["links"]):
            number, group = groups[-1]
            state["links"].append({"hosts": list(link), "round": number, "rounds": [n for n, _g in groups],
                                   "group": group["id"], "busbw_gbps": group["busbw_gbps"], "floor_gbps": group["floor_gbps"]})


# ---------------------------------------------------------------- planning the next round

def pair_schedule(hosts: Sequence[str]) -> list[list[list[str]]]:
    """Every pair once, in rounds of disjoint pairs (the circle method: N-1 rounds, N when odd; one host sits out)."""
    ring: list[Optional[str]] = list(hosts) + ([None] if len(hosts) % 2 else [])
    order = {h: i for i, h in enumerate(hosts)}
    count = len(ring)
    rounds = []
    for _round in range(count - 1):
        pairs = [(ring[i], ring[count - 1 - i]) for i in range(count // 2)]
        rounds.append([sorted((a, b), key=lambda h: order[h]) for a, b in pairs if a is not None and b is not None])
        ring = [ring[0], ring[-1]] + ring[1:-1]
    return rounds


def _halves(members: Sequence[str]) -> tuple[list[str], list[str]]:
    middle = (len(members) + 1) // 2
    return list(members[:middle]), list(members[middle:])


def next_round(state: dict[str, Any]) -> dict[str, Any]:
    """Plan the next round into state["plan"] ({round, stage, groups: [{id, members, purpose}]}), or set done."""
    if state["done"] or state["plan"]:
        return state
    number = len(state["rounds"]) + 1
    live = [h for h in state["hosts"] if h not in state["errored"]]
    if len(live) < 2 or number > state["max_rounds"]:
        return _finish(state, "round bound reached" if number > state["max_rounds"] else None)
    stage, groups = _plan(state, number, live)
    if not groups:
        return _finish(state, None)
    state["plan"] = {"round": number, "stage": stage,
                     "groups": [{"id": "r%dg%d" % (number, i + 1), "members": members, "purpose": purpose}
                                for i, (members, purpose) in enumerate(groups)]}
    return state


def _plan(state: Mapping[str, Any], number: int, live: list[str]) -> tuple[str, list[tuple[list[str], str]]]:
    if state["mode"] == PAIRWISE:
        schedule = pair_schedule(state["hosts"])
        done = len([r for r in state["rounds"] if r["stage"] == PAIR])
        while done < len(schedule):
            pairs = [p for p in schedule[done] if not set(p) & set(state["errored"])]
            if pairs:
                return PAIR, [(p, PAIR) for p in pairs]
            done += 1  # every pair of this round has a host in ERROR
        return PAIR, _isolation(state, live)  # a pair that did not finish gets another go
    absolute = all(state["floors"].get(h) is not None for h in live)
    stages = [r["stage"] for r in state["rounds"]]
    if not state["rounds"]:
        return (WHOLE, [(live, WHOLE)]) if absolute else (SCREEN, _screen(live))
    if SCREEN in stages and WHOLE not in stages:
        return WHOLE, [(live, WHOLE)]
    if state["reference_gbps"] is None and not absolute and SCREEN in stages:
        return SCREEN, _screen(live)  # no pair of the screen finished: screen again
    return HALF, _isolation(state, live)


def _screen(live: list[str]) -> list[tuple[list[str], str]]:
    groups = [live[i:i + 2] for i in range(0, len(live) - len(live) % 2, 2)]
    if len(live) % 2:
        groups[-1] = groups[-1] + [live[-1]]
    return [(g, SCREEN) for g in groups]


def _isolation(state: Mapping[str, Any], live: list[str]) -> list[tuple[list[str], str]]:
    """Halves of every failing group's unproven hosts, solo tests with proven-good pads, cross-cut link probes and
    retests of hosts whose group did not finish; disjoint, so they all run at once."""
    used: set[str] = set()
    planned: list[tuple[list[str], str]] = []
    solos: list[str] = []
    order = {h: i for i, h in enumerate(state["hosts"])}
    latest: dict[str, tuple[int, dict[str, Any]]] = {}
    for number, group in failing_groups(state):
        for host in unproven(state, group):
            latest[host] = (number, group)
    by_group: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for host, (_number, group) in latest.items():
        by_group.setdefault(group["id"], (group, []))[1].append(host)
    for group, suspects in sorted(by_group.values(), key=lambda item: -len(item[1])):
        suspects.sort(key=lambda h: order[h])
        explained = any(m in state["bad"] for m in group["members"])
        if len(suspects) == 1 or explained:
            solos.extend(suspects)
            continue
        for half in _halves(suspects):
            if len(half) == 1:
                solos.extend(half)
            else:
                planned.append((half, HALF))
                used.update(half)
    # Hosts in no group that finished (a rank did not join or was lost), and not suspected: test them again together.
    judged = {m for entry in state["rounds"] for g in entry["groups"] if g["verdict"] != GROUP_INCOMPLETE for m in g["members"]}
    again = [h for h in live if h not in judged and h not in used and h not in solos and h not in state["bad"]]
    if len(again) >= 2:
        planned.append((again, RETEST))
        used.update(again)
    else:
        solos.extend(again)
    pads = [h for h in state["good"] if h not in used and h not in solos]
    waiting: list[str] = []
    for host in solos:
        if host in used:
            continue
        if pads:
            pad = pads.pop(0)
            planned.append((sorted([host, pad], key=lambda h: order[h]), SOLO))
            used.update((host, pad))
        else:
            waiting.append(host)
    tried = {tuple(sorted(g["members"])) for entry in state["rounds"] for g in entry["groups"] if len(g["members"]) == 2}
    while len(waiting) >= 2:  # no proven-good host to spare: two suspects never paired before, to find a good one
        first = waiting.pop(0)
        partner = next((h for h in waiting if tuple(sorted((first, h))) not in tried), None)
        if partner is None:
            continue
        waiting.remove(partner)
        planned.append((sorted([first, partner], key=lambda h: order[h]), SOLO))
        used.update((first, partner))
    named = [entry["hosts"] for entry in state["links"]]
    proven = {tuple(link) for link in state["proven_links"]}
    for _number, group in failing_groups(state):
        if unproven(state, group) or any(m in state["bad"] or m in state["errored"] for m in group["members"]):
            continue
        open_links = [link for link in ring_links(group["members"]) if tuple(link) not in proven]
        if any(link in named for link in open_links):
            continue  # explained by a named link
        for link in open_links:  # each unproven link as a pair of its own (a pair's own link: tested once more)
            if not set(link) & used:
                planned.append((sorted(link, key=lambda h: order[h]), CROSS))
                used.update(link)
    return [(members, purpose) for members, purpose in planned if len(members) >= 2]


def _finish(state: dict[str, Any], note: Optional[str]) -> dict[str, Any]:
    state["done"] = True
    state["plan"] = None
    state["note"] = note
    return state


# ---------------------------------------------------------------- a round's results

def group_outcome(group: Mapping[str, Any], results: Mapping[str, Optional[Mapping[str, Any]]]) -> dict[str, Any]:
    """One group's outcome from its ranks' module results (host -> the module's ``fabric`` dict, None when the host
    returned nothing): figures from rank 0's verdict, and which hosts are in ERROR and why."""
    members = list(group["members"])
    verdict: Optional[Mapping[str, Any]] = None
    for host in members:
        result = results.get(host)
        if result and isinstance(result.get("verdict"), dict):
            verdict = result["verdict"]
            if result.get("rank") == 0:
                break
    errors: list[dict[str, Any]] = []

    def error(host: str, kind: str, reason: str) -> None:
        if not any(e["host"] == host for e in errors):
            errors.append({"host": host, "kind": kind, "reason": reason})

    if verdict is not None:
        for item in verdict.get("missing") or []:
            error(members[item["rank"]], "did not join", str(item.get("reason")))
        for item in verdict.get("lost") or []:
            error(members[item["rank"]], "lost mid-collective", str(item.get("reason")))
        for item in verdict.get("broken") or []:
            error(members[item["rank"]], "rank failed", str(item.get("reason")))
    else:
        # No verdict: rank 0 never got going (its address, its port, its host), and the others could not join it -
        # rank 0 is the one in ERROR; a rank that was never started says nothing about its host.
        first = results.get(members[0])
        if first is None:
            error(members[0], "rank failed", "rank 0 returned no result (unreachable, killed, or past the task's deadline)")
        elif first.get("outcome") != RANK_OK:
            error(members[0], "rank failed", str(first.get("reason")))
    complete = bool(verdict and verdict.get("complete")) and not errors
    out: dict[str, Any] = {"complete": complete, "errors": errors, "backend": (verdict or {}).get("backend"),
                           "reason": None if complete else _reason(verdict, errors)}
    if complete and verdict is not None:
        rows = list(verdict.get("rows") or [])
        out.update(rows=rows, busbw_gbps=rows[-1]["busbw_gbps"] if rows else None,
                   latency_us=rows[0]["time_us"] if rows else None, verified=all(r.get("verified") for r in rows))
    return out


def _reason(verdict: Optional[Mapping[str, Any]], errors: Sequence[Mapping[str, Any]]) -> str:
    if errors:
        return "; ".join("%s %s: %s" % (e["host"], e["kind"], e["reason"]) for e in errors[:3])
    return str((verdict or {}).get("backend_reason") or "no verdict")


# ---------------------------------------------------------------- what the report says

def _groups_of(state: Mapping[str, Any], host: str) -> list[tuple[int, dict[str, Any]]]:
    return [(entry["round"], g) for entry in state["rounds"] for g in entry["groups"] if host in g["members"]]


def _gbps(value: Optional[float]) -> str:
    return "n/a" if value is None else "%.3g GB/s" % value


def proof_line(state: Mapping[str, Any], host: str) -> str:
    """The short proof a drain reason carries: 'rounds 2,4: 0.0031<0.1 GB/s with proven-good n7'."""
    bad = state["bad"].get(host)
    if not bad:
        return ""
    groups = {g["id"]: g for _n, g in _groups_of(state, host)}
    last = groups[bad["groups"][-1]]
    partners = [m for m in last["members"] if m != host]
    return "rounds %s: %.3g<%.3g GB/s with %s" % (",".join(str(r) for r in bad["rounds"]), last["busbw_gbps"] or 0,
                                                  last["floor_gbps"] or 0, ",".join(partners[:2]) + (" +%d" % (len(partners) - 2)
                                                                                                     if len(partners) > 2 else ""))


def host_checks(state: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each host's fabric.* checks (the shape doctor's checks have), from the state; a busy host's SKIP naming why."""
    out = {}
    for host in state["hosts"]:
        out[host] = [dict(id=CHECK_COLLECTIVE, title="Collective across hosts", category="fabric", **_collective(state, host)),
                     dict(id=CHECK_LINK, title="Links to the other hosts", category="fabric", **_link_finding(state, host))]
    for host, reason in (state.get("busy") or {}).items():
        details = {"rounds": [], "busy": reason}
        out[host] = [dict(id=CHECK_COLLECTIVE, title="Collective across hosts", category="fabric",
                          **finding(SKIP, "%s: %s" % (NOT_TESTED_BUSY, reason), details)),
                     dict(id=CHECK_LINK, title="Links to the other hosts", category="fabric",
                          **finding(SKIP, "%s: no verdict on this host's links" % NOT_TESTED_BUSY, {"links": [], "busy": reason}))]
    return out


def _rounds_detail(state: Mapping[str, Any], host: str) -> list[dict[str, Any]]:
    return [{"round": number, "group": g["id"], "members": g["members"], "purpose": g["purpose"], "verdict": g["verdict"],
             "busbw_gbps": g.get("busbw_gbps"), "floor_gbps": g.get("floor_gbps"), "backend": g.get("backend")}
            for number, g in _groups_of(state, host)]


def _collective(state: Mapping[str, Any], host: str) -> dict[str, Any]:
    found = _collective_finding(state, host)
    forced = (state.get("forced") or {}).get(host)
    if forced:  # tested on a busy node: its figure may be low because of what else ran
        found["details"]["forced"] = forced
        found["message"] = "%s; force: tested although %s" % (found["message"], forced)
    return found


def _collective_finding(state: Mapping[str, Any], host: str) -> dict[str, Any]:
    rounds = _rounds_detail(state, host)
    details: dict[str, Any] = {"rounds": rounds}
    if host in state["errored"]:
        err = state["errored"][host]
        details.update(error=err)
        return finding(ERROR, "%s in round %d: %s" % (err["kind"], err["round"], err["reason"]), details, REMEDIATION_ERROR)
    if host in state["bad"]:
        bad = state["bad"][host]
        details.update(proof=proof_line(state, host), proof_rounds=bad["rounds"], proof_groups=bad["groups"])
        last = next(r for r in rounds if r["group"] == bad["groups"][-1])
        details.update(busbw_gbps=last["busbw_gbps"], floor_gbps=last["floor_gbps"])
        return finding(FAIL, "isolated as the slow host: %s (the other members proven good)" % proof_line(state, host),
                       details, REMEDIATION_HOST)
    passed = [r for r in rounds if r["verdict"] == GROUP_PASSED]
    if host in state["good"] and passed:
        best = max(passed, key=lambda r: r["busbw_gbps"] or 0)
        group = next(g for _n, g in _groups_of(state, host) if g["id"] == best["group"])
        details.update(busbw_gbps=best["busbw_gbps"], floor_gbps=best["floor_gbps"], latency_us=group.get("latency_us"),
                       backend=best["backend"])
        return finding(PASS, "%s bus bandwidth in a group of %d (round %d, %s), floor %s" % (
            _gbps(best["busbw_gbps"]), len(best["members"]), best["round"], best["backend"], _gbps(best["floor_gbps"])), details)
    failing = [r for r in rounds if r["verdict"] == GROUP_BELOW]
    if failing:
        details.update(busbw_gbps=failing[-1]["busbw_gbps"], floor_gbps=failing[-1]["floor_gbps"])
        why = state.get("note") or ("no proven-good host to tell it from %s" % ", ".join(
            m for m in failing[-1]["members"] if m != host))
        return finding(FAIL, "in %d failing group%s, never isolated (%s)" % (len(failing), "" if len(failing) == 1 else "s", why),
                       details, REMEDIATION_HOST)
    if any(r["verdict"] == GROUP_UNJUDGED for r in rounds):
        return finding(WARN, "measured but not judged: no floor (fabric_busbw_gbps_min) and no reference group", details)
    return finding(SKIP, "not tested: no other reachable host to run a collective with", details)


def _link_finding(state: Mapping[str, Any], host: str) -> dict[str, Any]:
    mine = [link for link in state["links"] if host in link["hosts"]]
    if mine:
        peers = [next(h for h in link["hosts"] if h != host) for link in mine]
        return finding(WARN, "slow link to %s: %s < %s in round %d, while both hosts pass with others" % (
            ", ".join(peers), _gbps(mine[0]["busbw_gbps"]), _gbps(mine[0]["floor_gbps"]), mine[0]["round"]),
            {"links": mine}, REMEDIATION_LINK)
    if host in state["good"]:
        return finding(PASS, "every link to this host that was tested passed", {"links": []})
    return finding(SKIP, "no verdict on this host's links", {"links": []})


def section(state: Mapping[str, Any]) -> dict[str, Any]:
    """The fleet report's ``fabric`` section: settings, every round's groups, and what was found."""
    rounds = []
    for entry in state["rounds"]:
        rounds.append({"round": entry["round"], "stage": entry["stage"], "groups": [
            {key: g.get(key) for key in ("id", "members", "purpose", "verdict", "busbw_gbps", "latency_us", "floor_gbps",
                                         "floor_from", "backend", "reason", "errors")} for g in entry["groups"]]})
    return {
        "mode": state["mode"],
        "hosts": list(state["hosts"]),
        "rounds": rounds,
        "round_count": len(rounds),
        "max_rounds": state["max_rounds"],
        "reference_gbps": state["reference_gbps"],
        "relative_margin": state["options"]["relative_margin"],
        "done": state["done"],
        "note": state.get("note"),
        "isolated": [{"host": host, "rounds": bad["rounds"], "proof": proof_line(state, host)} for host, bad in state["bad"].items()],
        "links": list(state["links"]),
        "errors": [dict(host=host, **err) for host, err in state["errored"].items()],
        "good": list(state["good"]),
        "bounds": {"one_bad_host": bound_one(len(state["hosts"])), "two_bad_hosts": bound_two(len(state["hosts"]))},
        "busy": [{"host": host, "reason": reason} for host, reason in (state.get("busy") or {}).items()],
        "forced": [{"host": host, "reason": reason} for host, reason in (state.get("forced") or {}).items()],
    }


def mark_unreachable(state: dict[str, Any], hosts: Iterable[str]) -> dict[str, Any]:
    """Hosts Ansible can no longer reach: in ERROR (kind "unreachable"), left out of later rounds."""
    for host in hosts:
        if host in state["hosts"] and host not in state["errored"] and host not in state["bad"]:
            state["errored"][host] = {"round": len(state["rounds"]) + 1, "group": None, "kind": UNREACHABLE,
                                      "reason": "Ansible could not reach the host"}
    return state


def summary_line(state: Mapping[str, Any]) -> str:
    """One line: rounds, isolated hosts and links, hosts in ERROR."""
    parts = ["%d round%s" % (len(state["rounds"]), "" if len(state["rounds"]) == 1 else "s")]
    if state["bad"]:
        parts.append("isolated %s" % ", ".join(state["bad"]))
    if state["links"]:
        parts.append("slow link%s %s" % ("" if len(state["links"]) == 1 else "s",
                                         ", ".join("-".join(link["hosts"]) for link in state["links"])))
    if state["errored"]:
        parts.append("ERROR on %s" % ", ".join(state["errored"]))
    if not state["bad"] and not state["links"] and not state["errored"]:
        parts.append("%d of %d hosts proven good" % (len(state["good"]), len(state["hosts"])))
    if state.get("busy"):
        parts.append("not tested (busy): %s" % ", ".join(state["busy"]))
    if state.get("note"):
        parts.append(state["note"])
    return "fabric: " + "; ".join(parts)


EVIDENCE_KIND = "continuum.hydra.fabric_evidence"
EVIDENCE_VERSION = "1.0"
# What to collect on an isolated host before anyone touches its cable or port (the commands, not run by hydra).
EVIDENCE_COMMANDS = ("ip -s -s link show", "ethtool -S <interface>", "ethtool <interface>", "ibstat", "mlxlink -d <device> -m",
                     "dmesg -T | grep -iE 'link|mlx|eth|nic'")


def fabric_evidence(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One evidence record per host the fabric test isolated or found a slow link on: evidence/<host>/fabric.json with
    the proof, every group it was in (members, figure, floor, verdict) and the commands to collect its NIC state."""
    fabric = report.get("fabric") or {}
    if not fabric:
        return []
    isolated = {item["host"]: item for item in fabric.get("isolated") or []}
    linked: dict[str, list[Mapping[str, Any]]] = {}
    for link in fabric.get("links") or []:
        for host in link["hosts"]:
            linked.setdefault(host, []).append(link)
    records = []
    for host in sorted(set(isolated) | set(linked)):
        groups = [dict(g, round=entry["round"]) for entry in fabric.get("rounds") or [] for g in entry["groups"]
                  if host in g["members"]]
        records.append({
            "kind": EVIDENCE_KIND, "schema_version": EVIDENCE_VERSION, "generated_at": report.get("generated_at"),
            "host": host, "uuid": None, "pci_bus_id": None, "serial": None,
            "path": "/".join((evidence.EVIDENCE_DIR, evidence.safe_name(host), "fabric.json")),
            "isolated": isolated.get(host), "links": linked.get(host, []), "groups": groups,
            "collect": list(EVIDENCE_COMMANDS),
        })
    return records

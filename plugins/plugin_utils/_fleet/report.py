# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Building the fleet report from host results, one host at a time (controller side, no I/O).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Iterable, Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._results import SCHEMA_VERSION, summarize
from ansible_collections.continuum.hydra.plugins.module_utils._status import (
    ERROR,
    FAIL,
    HOST_STATUSES,
    NOT_JUDGED,
    OPTIONAL_STATUSES,
    STATUSES,
    TASK_FAILED,
    UNCHECKED,
    UNREACHABLE,
    WARN,
    host_verdict,
)
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.workloads import merge_entries

FLEET_SCHEMA_VERSION = "1.6.0"
REPORT_KIND = "continuum.hydra.fleet_report"

# Actions list the worst problems first: a FAIL on one host outranks a WARN on many.
_ACTION_RANK = {FAIL: 0, ERROR: 1, WARN: 2}


# What a collector reads of a registered doctor result besides its checks (add_registered), and of each check; of a
# check that may fail, its details' proof too (a drain reason's).
_RESULT_KEYS = ("msg", UNREACHABLE, "skipped", "screen")
_CHECK_KEYS = ("id", "status", "blocked_by")


def _thin(result: Any) -> Any:
    """The parts of a registered doctor result a verdict reads, copied once into plain data.

    hostvars hands a filter lazily templated containers, where every read of a key costs a template check: reading
    each check's id, status and blocked_by once, here, instead of walking the whole result several times
    (the verdict, the roots, the report's counts and actions), is what keeps a filter cheap at fleet size."""
    if not isinstance(result, Mapping):
        return result
    thin = dict((key, result[key]) for key in _RESULT_KEYS if key in result)
    checks = result.get("checks")
    if isinstance(checks, list):
        thin["checks"] = [_thin_check(chk) if isinstance(chk, Mapping) else chk for chk in checks]
    elif checks is not None:
        thin["checks"] = checks
    return thin


def _thin_check(chk: Mapping[str, Any]) -> dict[str, Any]:
    thin = dict((key, chk[key]) for key in _CHECK_KEYS if key in chk)
    if thin.get("status") in (FAIL, ERROR) or thin.get("blocked_by"):
        details = chk.get("details")
        if isinstance(details, Mapping) and details.get("proof"):
            thin["details"] = {"proof": details["proof"]}
    return thin


class FleetCollector:
    """Accumulates host outcomes as the play reports them; build() makes the report."""

    def __init__(self) -> None:
        self._hosts: dict[str, dict[str, Any]] = {}
        self.groups: dict[str, list[str]] = {}
        self.fabric: Optional[dict[str, Any]] = None  # the fabric test's section and each host's fabric.* checks

    @classmethod
    def from_hostvars(cls, hostvars: Any, hosts: Iterable[str], result_var: str) -> "FleetCollector":
        """Each host's registered doctor result (hostvars[host][result_var]; none: it never ran), as the filters read
        it: only what the verdict needs, read once. TypeError names a bad input."""
        if not isinstance(hostvars, Mapping):
            raise TypeError("input must be hostvars or a fleet report dict, got %s" % type(hostvars).__name__)
        collector = cls()
        for name in hosts:
            variables = hostvars[name] if name in hostvars else {}
            if not isinstance(variables, Mapping):
                raise TypeError("hostvars of %s is not a mapping of variables" % name)
            result = _thin(variables.get(result_var))
            if result is not None and not isinstance(result, dict):
                raise TypeError("%s of %s must be a doctor result dict, got %s" % (result_var, name, type(result).__name__))
            collector.add_registered(name, result)
        return collector

    def _entry(self, host: str) -> dict[str, Any]:
        entry = self._hosts.get(host)
        if entry is None:
            entry = self._hosts[host] = {"status": UNCHECKED, "message": None, "failing_checks": [], "warning_checks": [],
                                         "roots": [], "doctor": None, "profile": None, "env_setup": None, "class": None}
        return entry

    def add_doctor(self, host: str, result: Mapping[str, Any]) -> None:
        checks = result.get("checks")
        if not isinstance(checks, list):
            # Not a verdict: a crash whose error the play ignores (validate_partition.yml), or list_checks (judges nothing).
            if "catalogue" not in result:
                self.add_task_failed(host, "doctor returned no checks: %s" % " ".join(str(result.get("msg") or "no result").split()))
            return
        if not checks:
            # A verdict needs at least one check: an empty list judged nothing, so it is never healthy.
            self.add_unchecked(host, "doctor ran no check on this host")
            return
        entry = self._entry(host)
        # Recount rather than trust the summary: the report must agree with the checks it lists.
        counted = judged(checks)
        entry.update(status=host_verdict(summarize(counted)), message=None, doctor=result,
                     failing_checks=[c["id"] for c in counted if c["status"] in (FAIL, ERROR)],
                     warning_checks=[c["id"] for c in counted if c["status"] == WARN], roots=roots(checks))

    def add_registered(self, host: str, result: object) -> None:
        """A doctor result as a play registered it (hostvars), whatever became of the task; None: it never ran."""
        if result is None:
            self.add_unreachable(host, "no doctor result: the host was unreachable or doctor did not run on it")
        elif not isinstance(result, dict):
            raise TypeError("a doctor result must be a dict, got %s" % type(result).__name__)
        elif isinstance(result.get("checks"), list):
            self.add_doctor(host, result)
        elif result.get(UNREACHABLE):  # Ansible's own flag, the word the verdict takes
            self.add_unreachable(host, str(result.get("msg") or UNREACHABLE))
        elif result.get("skipped"):
            self.add_unchecked(host, "doctor was skipped on this host")
        elif isinstance(result.get("screen"), dict) and result["screen"].get("screened") is False:
            # continuum.hydra.screen: the node's job never ran (busy, drained): not judged, never healthy nor failed.
            self.add_unchecked(host, "not screened: %s" % result["screen"].get("reason"))
        else:
            self.add_task_failed(host, "doctor: %s" % " ".join(str(result.get("msg") or "task failed").split()))

    def add_profile(self, host: str, summary: Optional[Mapping[str, Any]]) -> None:
        """The host's profile summary: {figures, gpus, verdict} (see _fleet/profile_summary.py and _fleet/figures.py)."""
        self._entry(host)["profile"] = summary

    def add_env_setup(self, host: str, manifest: Optional[Mapping[str, Any]]) -> None:
        self._entry(host)["env_setup"] = manifest

    def add_workload(self, host: str, workload: Mapping[str, Any]) -> None:
        """The host's workload rows (_fleet/workloads.py host_entry); a second workload task's rows are added."""
        entry = self._entry(host)
        entry["workload"] = merge_entries(entry.get("workload"), workload)

    def set_groups(self, host: str, groups: Iterable[str]) -> None:
        self.groups[host] = sorted(groups)

    def add_unchecked(self, host: str, message: str) -> None:
        """A host doctor did not judge (its task was skipped): in the report, with the reason."""
        entry = self._entry(host)
        if entry["doctor"] is None:
            entry["message"] = message

    def add_entry(self, host: str, entry: Mapping[str, Any]) -> None:
        """A host's entry as another collector held it (a slice's part): taken whole."""
        self._hosts[host] = dict(entry)

    def add_unreachable(self, host: str, message: str) -> None:
        self._add_problem(host, UNREACHABLE, message)

    def add_task_failed(self, host: str, message: str) -> None:
        self._add_problem(host, TASK_FAILED, message)

    def _add_problem(self, host: str, status: str, message: str) -> None:
        entry = self._entry(host)
        if entry["doctor"] is not None:
            return  # doctor already judged this host; a later task's trouble does not erase that
        entry.update(status=status, message=message)

    @property
    def hosts(self) -> Mapping[str, Mapping[str, Any]]:
        return self._hosts

    def __len__(self) -> int:
        return len(self._hosts)

    def add_fabric(self, section: Mapping[str, Any], checks: Mapping[str, list[dict[str, Any]]]) -> None:
        """The fabric test's verdict (playbooks/fabric.yml, _fleet/fabric.py): the report's ``fabric`` section, and
        each host's fabric.* checks, joined to its other checks when the report is built."""
        self.fabric = {"section": dict(section), "checks": dict(checks)}

    def _merge_fabric(self) -> None:
        """Each host's fabric.* checks join its doctor checks (a host doctor did not check gets a result of these
        alone), so findings, actions, evidence, the gate and every format carry them; unreachable hosts stay so. A host
        the idle guard kept out of the test, with no doctor verdict, is unchecked with the reason: never healthy."""
        busy = dict((item["host"], item["reason"]) for item in (self.fabric or {}).get("section", {}).get("busy") or [])
        for host, checks in (self.fabric or {}).get("checks", {}).items():
            entry = self._entry(host)
            if entry["doctor"] is None and entry["status"] in NOT_JUDGED:
                continue
            if entry["doctor"] is None and host in busy:
                self.add_unchecked(host, "fabric: not tested: %s" % busy[host])
                continue
            doctor = dict(entry["doctor"] or {"schema_version": SCHEMA_VERSION})
            merged = [c for c in doctor.get("checks") or [] if not str(c.get("id", "")).startswith("fabric.")] + list(checks)
            doctor.update(checks=merged, summary=summarize(merged), overall_status=host_verdict(summarize(judged(merged))))
            self.add_doctor(host, doctor)

    def build(self, generated_at: Optional[str], playbook: Optional[str] = None) -> dict[str, Any]:
        if self.fabric is not None:
            self._merge_fabric()
        report = build_report(self._hosts, generated_at, playbook)
        if self.fabric is not None:
            report["fabric"] = self.fabric["section"]
        return report


def timed_out_message(task: str, seconds: Any) -> str:
    """Why a host has no result when its task ran into the task keyword ``timeout`` (docs/hosts_die.md)."""
    return ("%s: timed out after %s s (the task timeout: the module's own deadline plus a margin): the host stopped "
            "answering, or its Python hung before the module ran" % (task, seconds))


def no_hosts_message(pattern: Any) -> str:
    """The one line of a run whose play matched no host: a report of no host is not a healthy fleet."""
    shown = ", ".join(str(p) for p in pattern) if isinstance(pattern, (list, tuple)) else str(pattern)
    return "no host matched the play's hosts pattern %r (inventory, hydra_hosts, --limit): nothing was checked" % shown


def reported_checks(entry: Mapping[str, Any]) -> list[Any]:
    """The checks the report shows for a host: its doctor result's; for a host known from its slice's AWX artifact
    alone (playbooks/merge.yml, _fleet/parts.py), the failing and warning check ids that artifact carried."""
    return (entry.get("doctor") or {}).get("checks") or entry.get("artifact_checks") or []


def roots(checks: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The host's root causes: each check that blocked others (their ``blocked_by``), with how many it blocked.

    In the order of the checks; a blocked check names its root, whose own status and message say what failed.
    """
    blocked: dict[str, int] = {}
    for chk in checks:
        if chk.get("blocked_by"):
            blocked[chk["blocked_by"]] = blocked.get(chk["blocked_by"], 0) + 1
    return [{"check_id": chk["id"], "status": chk["status"], "message": chk.get("message"), "blocked": blocked[chk["id"]]}
            for chk in checks if chk["id"] in blocked]


def judged(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The checks as the verdict counts them: a check blocked by a root that is not in the result at ERROR or FAIL
    counts as ERROR. doctor's own safety pass already guarantees this; an old or hand-made result may not."""
    failed = {c["id"] for c in checks if c["status"] in (FAIL, ERROR)}
    return [dict(c, status=ERROR) if c.get("blocked_by") and c["blocked_by"] not in failed else c for c in checks]


def build_report(hosts: Mapping[str, dict[str, Any]], generated_at: Optional[str], playbook: Optional[str] = None) -> dict[str, Any]:
    totals: dict[str, int] = {status: 0 for status in HOST_STATUSES}
    for status in OPTIONAL_STATUSES:
        if any(entry["status"] == status for entry in hosts.values()):
            totals[status] = 0
    check_counts: dict[str, dict[str, int]] = {}
    failing: dict[str, list[dict[str, Any]]] = {}
    actions: dict[tuple[str, str], dict[str, Any]] = {}
    for name in sorted(hosts):
        entry = hosts[name]
        totals[entry["status"]] += 1
        for chk in reported_checks(entry):
            counts = check_counts.get(chk["id"])
            if counts is None:
                counts = check_counts[chk["id"]] = dict((status, 0) for status in STATUSES)
            counts[chk["status"]] += 1
            if chk["status"] not in _ACTION_RANK or chk.get("blocked_by"):
                continue  # a blocked check's action is its root's
            if chk["status"] in (FAIL, ERROR):
                failing.setdefault(chk["id"], []).append({
                    "host": name, "status": chk["status"], "message": chk.get("message"),
                    "gpus": (chk.get("details") or {}).get("gpus") or [],
                })
            _add_action(actions, chk, name)
    totals["hosts"] = len(hosts)
    return {
        "schema_version": FLEET_SCHEMA_VERSION,
        "kind": REPORT_KIND,
        "generated_at": generated_at,
        "playbook": playbook,
        "totals": totals,
        "hosts": dict((name, hosts[name]) for name in sorted(hosts)),
        "checks": dict((cid, check_counts[cid]) for cid in sorted(check_counts)),
        "failing": dict((cid, failing[cid]) for cid in sorted(failing)),
        "actions": _ranked(actions),
    }


def _add_action(actions: dict[tuple[str, str], dict[str, Any]], chk: Mapping[str, Any], host: str) -> None:
    """One action per (check id, status): exactly the hosts with that check at that status, and that status's hint."""
    key = (chk["id"], chk["status"])
    action = actions.get(key)
    if action is None:
        action = actions[key] = {"check_id": chk["id"], "status": chk["status"], "remediations": {}, "hosts": []}
    hint = chk.get("remediation")
    if hint:
        action["remediations"][hint] = action["remediations"].get(hint, 0) + 1
    action["hosts"].append(host)


def add_actions(report: dict[str, Any], found: Iterable[Mapping[str, Any]]) -> None:
    """Actions of the fleet analysis (interconnect rates, flaps, peers: {check_id, status, remediation, hosts,
    host_count, subjects}) ranked among the doctor checks' by the same order."""
    merged = list(report["actions"]) + [dict(action) for action in found]
    report["actions"] = sorted(merged, key=lambda a: (_ACTION_RANK[a["status"]], -a["host_count"], a["check_id"]))


def _ranked(actions: Mapping[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for action in actions.values():
        hints = action.pop("remediations")
        # The hint most hosts share speaks for the group; ties go to the first in alphabetical order.
        action["remediation"] = sorted(hints.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if hints else None
        action["host_count"] = len(action["hosts"])
        out.append(action)
    out.sort(key=lambda a: (_ACTION_RANK[a["status"]], -a["host_count"], a["check_id"]))
    return out

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Rows the human-readable formats share (terminal, Markdown, HTML), so they all say the same thing.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._results import gpu_name
from ansible_collections.continuum.hydra.plugins.module_utils._status import (
    ERROR,
    ERRORED,
    FAIL,
    FAILED,
    HEALTHY,
    MISSING,
    NOT_JUDGED,
    PASS,
    TASK_FAILED,
    UNCHECKED,
    UNREACHABLE,
    WARN,
    WARNING,
    worst,
)

PROBLEM_STATUSES = (FAILED, ERRORED, UNREACHABLE, TASK_FAILED, MISSING)
STATUS_ORDER = (FAILED, ERRORED, UNREACHABLE, TASK_FAILED, MISSING, WARNING, UNCHECKED, HEALTHY)
STATUS_LABELS = {TASK_FAILED: "task failed"}

# (host, class, field, value, reference, basis, gpu labels)
DriftRow = tuple[str, Optional[str], str, Optional[str], Optional[str], str, list[str]]
# (host, gpu label or "", class, metric, value, median, change)
StragglerRow = tuple[str, str, str, str, float, float, str]


def status_label(status: str) -> str:
    return STATUS_LABELS.get(status, status)


def number(value: object) -> str:
    """A figure for people: 4 significant digits, no exponent for ordinary sizes."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if value != 0 and (abs(value) >= 1e7 or abs(value) < 1e-3):
        return "%.3g" % value
    return ("%.4g" % value) if abs(value) < 1e4 else "%d" % round(value)


def percent_change(ratio: Optional[float]) -> str:
    """0.77 -> "-23%" (the ratio of a figure to its class median, direction-adjusted)."""
    if ratio is None:
        return "-"
    return "%+.0f%%" % ((ratio - 1.0) * 100.0)


def gpu_label(gpu: Mapping[str, Any]) -> str:
    """A GPU as every format names it (_results.gpu_name: index, PCI address, UUID or serial; never "None")."""
    return gpu_name(gpu)


def gpu_labels(gpus: Iterable[Any]) -> list[str]:
    """Each GPU of a check's ``details.gpus`` named once, in order: gpu.xid_errors lists a GPU once per Xid code."""
    return list(dict.fromkeys(gpu_name(g) for g in gpus if isinstance(g, Mapping)))


def analysis(report: Mapping[str, Any]) -> dict[str, Any]:
    return report.get("analysis") or {}


def host_rows(report: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(host, entry) sorted worst status first, then by name."""
    rank = {s: i for i, s in enumerate(STATUS_ORDER)}
    return sorted(report["hosts"].items(), key=lambda kv: (rank.get(kv[1]["status"], len(rank)), kv[0]))


HOST_COLUMNS = ("host", "status", "failing checks", "warnings", "message")


def hosts_by_class(report: Mapping[str, Any]) -> list[tuple[Optional[str], list[tuple[str, dict[str, Any]]]]]:
    """(class, its hosts worst first) in the analysis's class order, hosts without a class last."""
    order = dict((name, n) for n, name in enumerate(analysis(report).get("classes") or {}))
    per_class: dict[Optional[str], list[tuple[str, dict[str, Any]]]] = {}
    for host, entry in host_rows(report):
        per_class.setdefault(entry.get("class"), []).append((host, entry))
    return sorted(per_class.items(), key=lambda kv: (kv[0] is None, order.get(kv[0] or "", len(order)), kv[0] or ""))


def failing_by_host(report: Mapping[str, Any]) -> list[tuple[str, str, list[tuple[str, str, Optional[str], list[str]]]]]:
    """[(host, status, [(check id, check status, message, [gpu labels])])] for hosts with FAIL/ERROR checks,
    or the host's message when it never ran doctor (unreachable, task failed). A root cause's message says how many
    checks it blocked (those are not rows of their own)."""
    per_host: dict[str, list[tuple[str, str, Optional[str], list[str]]]] = {}
    for check_id, entries in report["failing"].items():
        for entry in entries:
            blocked = blocked_counts(report, entry["host"]).get(check_id)
            message = entry.get("message")
            if blocked:
                message = "%s (%s)" % (message, blocked_phrase(blocked))
            per_host.setdefault(entry["host"], []).append(
                (check_id, entry["status"], message, gpu_labels(entry.get("gpus") or [])))
    rows: list[tuple[str, str, list[tuple[str, str, Optional[str], list[str]]]]] = []
    for host, entry in host_rows(report):
        if host in per_host:
            rows.append((host, entry["status"], sorted(per_host[host], key=lambda c: (c[1] != FAIL, c[0]))))
        elif entry["status"] in NOT_JUDGED:
            rows.append((host, entry["status"], [("host", entry["status"], entry.get("message"), [])]))
    return rows


def blocked_counts(report: Mapping[str, Any], host: str) -> dict[str, int]:
    """The host's root causes: root check id -> how many checks it blocked (the host entry's ``roots``)."""
    entry = report["hosts"].get(host) or {}
    return dict((root["check_id"], root["blocked"]) for root in entry.get("roots") or [])


def blocked_phrase(count: int) -> str:
    return "blocked %d check%s" % (count, "" if count == 1 else "s")


# (host, root check id, root status, message, checks blocked)
RootRow = tuple[str, str, str, Optional[str], int]


def root_rows(report: Mapping[str, Any]) -> list[RootRow]:
    """One row per host and root cause, worst host first."""
    return [(host, root["check_id"], root["status"], root.get("message"), root["blocked"])
            for host, entry in host_rows(report) for root in entry.get("roots") or []]


def straggler_rows(report: Mapping[str, Any]) -> list[StragglerRow]:
    """One row per slow host or GPU: (host, gpu label or "", class, metric, value, median, change)."""
    stragglers = analysis(report).get("stragglers") or {}
    rows: list[StragglerRow] = []
    for slow in stragglers.get("hosts") or []:
        for finding in slow["metrics"]:
            rows.append((slow["host"], "", slow["class"], finding["metric"], finding["value"], finding["median"],
                         percent_change(finding["ratio"])))
    for slow in stragglers.get("gpus") or []:
        for finding in slow["metrics"]:
            rows.append((slow["host"], gpu_name(slow), slow["class"], finding["metric"], finding["value"], finding["median"],
                         percent_change(finding["ratio"])))
    rows.sort(key=lambda r: (r[0], r[1], r[3]))
    return rows


def drift_rows(report: Mapping[str, Any]) -> list[DriftRow]:
    """(host, class, field, value, reference, basis, gpu labels) per drifting field, then per drifting Python
    package of env_setup's virtualenv (field "package <name>", None for not installed)."""
    drift = analysis(report).get("drift") or {}
    rows: list[DriftRow] = [(i["host"], i["class"], i["field"], i["value"], i["reference"], i["basis"],
                             ["%s: %s" % (gpu_name(g), g["value"]) for g in i.get("gpus") or []]) for i in drift.get("items") or []]
    env_drift = analysis(report).get("env_drift") or {}
    rows.extend((i["host"], i["class"], "package %s" % i["package"], i["version"], i["majority"], "majority", [])
                for i in env_drift.get("drift") or [])
    return sorted(rows, key=lambda r: (r[0], r[2]))


def drift_hosts(report: Mapping[str, Any]) -> set[str]:
    return {row[0] for row in drift_rows(report)}


def straggler_hosts(report: Mapping[str, Any]) -> set[str]:
    """Hosts with a slow host figure or a slow GPU."""
    stragglers = analysis(report).get("stragglers") or {}
    return {s["host"] for s in (stragglers.get("hosts") or []) + (stragglers.get("gpus") or [])}


def findings_store_problems(report: Mapping[str, Any]) -> list[str]:
    """Why the findings store was set aside or not updated this run (report["findings_store"]), one line each."""
    return [str(p) for p in (report.get("findings_store") or {}).get("problems") or []]


def finding_gpu(item: Mapping[str, Any]) -> str:
    """What a finding is about below its host: its GPU (gpu_name), the port, link or device of an interconnect finding,
    or "" for the host itself."""
    if item.get("gpu_uuid"):
        return gpu_name({"index": item.get("gpu_index"), "uuid": item["gpu_uuid"]})
    return str(item.get("subject") or "")


def findings_timeline(report: Mapping[str, Any]) -> list[tuple[str, int, int, int]]:
    """(run time "2026-11-22 13:00", findings opened, findings closed since the run before, open after it) for the runs
    the findings store remembers (report["findings_timeline"], _fleet/findings.py), oldest first."""
    return [(str(run["at"])[:16].replace("T", " "), int(run["opened"]), int(run["closed"]), int(run["open"]))
            for run in report.get("findings_timeline") or []]


def timeline_line(report: Mapping[str, Any]) -> str:
    """One sentence on the findings over the remembered runs: opened, closed, open now and before ("" without them)."""
    runs = findings_timeline(report)
    if len(runs) < 2:
        return ""
    opened, closed = sum(r[1] for r in runs[1:]), sum(r[2] for r in runs[1:])
    return "Findings over the last %d runs: %d opened, %d closed; %d open now (%d after the first of them)" % (
        len(runs), opened, closed, runs[-1][3], runs[0][3])


# ---------------------------------------------------------------- grouped by (check, status), and the first screen
# A person reads the top of the report: what is broken and what to do first. Per-host rows of one cause on 200 hosts
# would bury it, so failing checks and findings are one row per (check, status), its hosts collapsed behind it.

FEW_HOSTS = 3  # a group of at most this many hosts is shown host by host
PREVIEW_HOSTS = 5  # host names shown before "+M more" where the list cannot be collapsed (Markdown, terminal)
TOP_ACTIONS = 5
# FAIL before ERROR, the hosts that could not be judged at all, then WARN.
GROUP_ORDER = (FAIL, ERROR, UNREACHABLE, TASK_FAILED, MISSING, WARN)
HOST_CHECK = "host"  # the "check" of a host with no verdict (unreachable, task failed, missing): its own reachability


class Member(NamedTuple):
    """One host of a group: the GPUs (or ports) named, its message, and for findings when and how often seen."""

    host: str
    gpus: list[str]
    message: str
    first_seen: str = ""
    last_seen: str = ""
    times_seen: int = 0
    escalation: str = ""
    level: int = 0


class CheckGroup(NamedTuple):
    """The hosts where one check has one status."""

    status: str
    check_id: str
    members: list[Member]

    @property
    def expanded(self) -> bool:
        """Few enough hosts to show one row each."""
        return len(self.members) <= FEW_HOSTS

    @property
    def hosts(self) -> list[str]:
        return [m.host for m in self.members]

    def messages(self) -> tuple[str, int]:
        """(the message most of its hosts share, how many other messages there are)."""
        counts = Counter(m.message for m in self.members if m.message)
        if not counts:
            return "", 0
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0], len(counts) - 1

    def message(self) -> str:
        """The message most of its hosts share, and how many others there are."""
        text, others = self.messages()
        return text + (" (and %s)" % plural_of(others, "other message") if others else "")

    def gpu_count(self) -> int:
        return sum(len(m.gpus) for m in self.members)

    def first_seen(self) -> str:
        return min((m.first_seen for m in self.members if m.first_seen), default="")

    def last_seen(self) -> str:
        return max((m.last_seen for m in self.members if m.last_seen), default="")

    def times_seen(self) -> int:
        return max((m.times_seen for m in self.members), default=0)

    def escalation(self) -> str:
        """The highest escalation step among its hosts, with how many hosts are on it."""
        top = max((m.level for m in self.members if m.escalation), default=0)
        if not top:
            return ""
        steps = Counter(m.escalation for m in self.members if m.escalation and m.level == top)
        step, count = sorted(steps.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        return "%s (%s)" % (step, plural_of(count, "host")) if len(self.members) > 1 else step


def plural_of(count: int, word: str) -> str:
    return "%d %s%s" % (count, word, "" if count == 1 else "s")


def _ordered(groups: Mapping[tuple[str, str], list[Member]]) -> list[CheckGroup]:
    rank = dict((s, i) for i, s in enumerate(GROUP_ORDER))
    return [CheckGroup(status, check_id, members) for (check_id, status), members in
            sorted(groups.items(), key=lambda kv: (rank.get(kv[0][1], len(rank)), -len(kv[1]), kv[0][0]))]


def failing_groups(report: Mapping[str, Any]) -> list[CheckGroup]:
    """Failing checks (FAIL, ERROR) and hosts that could not be judged, one group per (check, status): FAIL first, then
    ERROR, then the unjudged hosts; larger groups first; hosts worst first within a group (failing_by_host's order)."""
    groups: dict[tuple[str, str], list[Member]] = {}
    for host, _status, checks in failing_by_host(report):
        for check_id, status, message, gpus in checks:
            if check_id == HOST_CHECK and not gpus:  # a host doctor could not judge: the group is its status
                groups.setdefault((HOST_CHECK, status), []).append(Member(host, [], message or status_label(status)))
            else:
                groups.setdefault((check_id, status), []).append(Member(host, gpus, message or ""))
    return _ordered(groups)


def finding_groups(report: Mapping[str, Any]) -> list[CheckGroup]:
    """The open findings, one group per (check, worst status), one member per host (its GPU findings together, by
    index: earliest first seen, latest last seen, most times seen, highest escalation); FAIL, ERROR, then WARN groups."""
    per_host: dict[tuple[str, str], dict[str, list[Mapping[str, Any]]]] = {}
    for item in report.get("findings") or []:
        if item.get("open"):
            per_host.setdefault((item["check_id"], item["status"]), {}).setdefault(item["host"], []).append(item)
    return _ordered(dict((key, [_finding_member(host, items) for host, items in hosts.items()]) for key, hosts in per_host.items()))


def _finding_member(host: str, items: Sequence[Mapping[str, Any]]) -> Member:
    """One host's findings of one (check, status) as one member."""
    items = sorted(items, key=lambda i: (i.get("gpu_index") is None, i.get("gpu_index") or 0, str(i.get("subject") or "")))
    steps = [i.get("escalation") or {} for i in items]
    top = max(steps, key=lambda step: int(step.get("level") or 0))
    escalation = ("%s: %s" % (top["action"], top["why"]) if top.get("why") else top.get("action")) or ""
    return Member(host, [name for name in (finding_gpu(i) for i in items) if name], str(items[-1].get("message") or ""),
                  min(str(i.get("first_seen") or "")[:10] for i in items), max(str(i.get("last_seen") or "")[:10] for i in items),
                  max(int(i.get("times_seen") or 0) for i in items), escalation, int(top.get("level") or 0))


def host_preview(names: Sequence[str], shown: int = PREVIEW_HOSTS) -> str:
    """"a, b, c, d, e +195 more": the first names of a list that is too long to print."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (" +%d more" % more if more > 0 else "")


def needs_action(report: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """(host status, its hosts) for each status that needs someone first: failed, error, unreachable, task failed,
    missing; in that order, hosts by name."""
    by_status: dict[str, list[str]] = {}
    for host, entry in report["hosts"].items():
        if entry["status"] in PROBLEM_STATUSES:
            by_status.setdefault(entry["status"], []).append(host)
    return [(status, sorted(by_status[status])) for status in PROBLEM_STATUSES if status in by_status]


def headline(report: Mapping[str, Any]) -> str:
    """The first sentence of the report: how many hosts need action, how many only warn, how many are healthy."""
    totals = report["totals"]
    count = totals["hosts"]
    if not count:
        return "No host was checked."
    bad = [(s, totals[s]) for s in PROBLEM_STATUSES if totals.get(s)]
    parts = []
    if bad:
        parts.append("%d of %s need%s action: %s" % (sum(n for _s, n in bad), plural_of(count, "host"),
                                                     "s" if sum(n for _s, n in bad) == 1 else "",
                                                     ", ".join("%d %s" % (n, status_label(s)) for s, n in bad)))
    for status, word in ((WARNING, "with warnings only"), (UNCHECKED, "not checked by doctor"), (HEALTHY, status_label(HEALTHY))):
        if totals.get(status):
            parts.append("%d %s" % (totals[status], word))
    if not bad and totals.get(HEALTHY) == count:
        return "All %s healthy." % plural_of(count, "host")
    return "; ".join(parts) + "."


# (rank, status, check id, host count, the first host names, remediation)
ActionRow = tuple[int, str, str, int, str, str]


def top_actions(report: Mapping[str, Any], count: int = TOP_ACTIONS) -> tuple[list[ActionRow], int]:
    """The first ``count`` actions (FAIL, ERROR, then WARN, most hosts first) with their first hosts, and how many more."""
    rows = [(rank, a["status"], a["check_id"], a["host_count"], host_preview(a.get("hosts") or []),
             a.get("remediation") or "see the check's details") for rank, a in enumerate(report["actions"][:count], 1)]
    return rows, max(0, len(report["actions"]) - count)


class Table(NamedTuple):
    """A table of the Markdown and HTML reports: its heading, its columns, what is said when it has no row."""
    title: str
    columns: tuple[str, ...]
    empty: str = ""


# The sections and tables of the Markdown and HTML reports, each said once here. "hosts" is each format's own: one
# host, or a group's count with its names collapsed (HTML <details>; Markdown the first names and "+M more").
FIRST_TITLE = "What to do first"
HOSTS_COLUMN = "hosts"
FAILING = Table("Failing checks", ("status", "check", HOSTS_COLUMN, "message", "GPUs"), "No failing checks.")
FINDINGS = Table("Open findings", ("status", "check", HOSTS_COLUMN, "GPUs / ports", "first seen", "last seen", "times seen", "escalation"),
                 "No open findings.")
FINDINGS_NOTE = "Kept until acknowledged with playbooks/acknowledge.yml, even when the check is healthy again."
ACTIONS = Table("All actions", ("#", "status", "check", HOSTS_COLUMN, "remediation"))
EVIDENCE = Table("Evidence for the vendor", ("host", "GPU", "serial", "evidence"))
EVIDENCE_NOTE = "One file per failing GPU: attach it and the nvidia-bug-report.sh output it names to the RMA ticket."
DRIFT = Table("Configuration drift", ("host", "class", "field", "value", "expected", "basis", "GPUs"), "No drift.")
STRAGGLERS = Table("Stragglers", ("host", "GPU", "class", "metric", "value", "class median", "vs median"), "No stragglers.")
WORKLOADS_TITLE = "Workloads"
WORKLOAD = Table("", ("class", "metric", "hosts", "median", "min", "max", "stragglers"), "No host measured it.")
WORKLOAD_FAILURES = Table("", ("host", "class", "status", "reason", "last log line"))
PLACEMENT = Table("GPU placement", ("host", "class", "lowest", "GPUs below (score, nearest NIC and link)"))
UNSCORED = Table("", ("host", "not scored because"))
INTERCONNECT_TITLE = "Interconnect"
RATES = Table("Worst ports and links by rate", ("status", "host", "port / link / device", "counter", "since the last run", "limit", "interval"))
FLAPS = Table("Flaps", ("host", "port / GPU", "since the last run"))
PEERS = Table("Ports off their peers", ("status", "host", "port", "is", "its class has it", "peers"))
DOMAINS = Table("Hosts off their NVLink domain", ("host", "NVLink domain", "its GPUs report", "the domain has", "hosts that agree"))
RESETS = Table("Not judged this run", ("host", "port / link / device", "why"))
FABRIC_TITLE = "Fabric"
FABRIC_ISOLATED = Table("", ("isolated host", "rounds", "proof"))
FABRIC_ROUNDS = Table("", ("round", "stage", "group", "purpose", "members", "bus bandwidth", "floor", "verdict"))
ERROR_COUNTERS = Table("Error counters above the class", ("host", "GPU", "class", "counter", "count", "class median", "robust z", "status"))
BOTTLENECK = Table("Fleet bottleneck", ("#", "action", "bottlenecks", "hosts"))
HISTORY_TITLE = "History"
HISTORY_EMPTY = "No repeat offenders, no degrading trends."
OFFENDERS = Table("Repeat offenders", ("host", "GPU", "failed in runs", "offences", "failing now"))
DEGRADING = Table("Degrading", ("host", "GPU", "metric", "trend", "EWMA", "runs"))
BATCH_PLAN = Table("Batch plan", ("host", "batch", "per GPU"))

# A row of a grouped table: its group, the one host it shows (None: the whole group, hosts collapsed), the text of
# each column but "hosts".
GroupRow = tuple[CheckGroup, Optional[Member], dict[str, str]]


def _rows(groups: Iterable[CheckGroup], cells: Any) -> list[GroupRow]:
    out: list[GroupRow] = []
    for group in groups:
        if group.expanded:
            out.extend((group, member, cells(group, member)) for member in group.members)
        else:
            out.append((group, None, cells(group, None)))
    return out


def _failing_cells(group: CheckGroup, member: Optional[Member]) -> dict[str, str]:
    if member is not None:
        return {"status": group.status, "check": group.check_id, "message": member.message, "GPUs": ", ".join(member.gpus)}
    gpus = group.gpu_count()
    return {"status": group.status, "check": group.check_id, "message": group.message(),
            "GPUs": plural_of(gpus, "GPU") if gpus else ""}


def failing_table(report: Mapping[str, Any]) -> list[GroupRow]:
    """The failing checks table: FAIL groups, ERROR groups, unjudged hosts; a group of few hosts one row each."""
    return _rows(failing_groups(report), _failing_cells)


def _finding_cells(group: CheckGroup, member: Optional[Member]) -> dict[str, str]:
    if member is not None:
        return {"status": group.status, "check": group.check_id, "GPUs / ports": ", ".join(member.gpus),
                "first seen": member.first_seen, "last seen": member.last_seen, "times seen": str(member.times_seen),
                "escalation": member.escalation}
    gpus = group.gpu_count()
    return {"status": group.status, "check": group.check_id, "GPUs / ports": str(gpus) if gpus else "",
            "first seen": group.first_seen(), "last seen": group.last_seen(), "times seen": "up to %d" % group.times_seen(),
            "escalation": group.escalation()}


def finding_table(report: Mapping[str, Any]) -> list[GroupRow]:
    """The open findings table, grouped as failing_table()."""
    return _rows(finding_groups(report), _finding_cells)


def member_lines(group: CheckGroup) -> Iterator[str]:
    """The hosts of a collapsed group as its expanded list shows them: the host, its GPUs, and its message where it is
    not the one most of the group share."""
    common = group.messages()[0]
    for member in group.members:
        text = member.host
        if member.gpus:
            text += ": " + ", ".join(member.gpus)
        if member.message and member.message != common:
            text += " - " + member.message
        yield text


def verdict_lines(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(status, sentence) of each fleet-wide verdict the first screen states, once its part of the report exists:
    the fabric test's (report["fabric"], _fabric.line()) and the interconnect over time. A section below has the
    detail of each."""
    # _fabric draws with _svg, which reads these views: imported here, not at the top, so no import order can cycle.
    from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _fabric  # pylint: disable=import-outside-toplevel

    out: list[tuple[str, str]] = []
    fabric = _fabric.line(report)
    if fabric:
        out.append((FAIL if _fabric.has_problems(report) else PASS, fabric))
    line = interconnect_line(report)
    if line:
        section = interconnect(report)
        seen = [r["status"] for r in (section.get("rates") or []) + (section.get("peers") or [])]
        if section.get("flaps") or (section.get("nvlink_domains") or {}).get("off"):
            seen.append(WARN)
        out.append((worst(seen), line))
    return out


# (workload, class, metric, hosts, median, min, max, stragglers "host -23%, ..." or "" or "not judged (...)", any straggler)
WorkloadRow = tuple[str, str, str, int, float, float, float, str, bool]
# (workload, host, class, status, reason, last log line or "")
WorkloadFailureRow = tuple[str, str, str, str, str, str]


def workloads(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report's ``workloads`` section (_fleet/workloads.py), {} when no host ran a workload."""
    return report.get("workloads") or {}


def workload_rows(report: Mapping[str, Any]) -> list[WorkloadRow]:
    """One row per workload x class x metric: the spread and the stragglers, workloads by name."""
    section = workloads(report)
    rows: list[WorkloadRow] = []
    for key, work in sorted((section.get("workloads") or {}).items()):
        for table in work["tables"]:
            if table["judged"]:
                slow = ", ".join("%s %s" % (s["host"], percent_change(s["ratio"])) for s in table["stragglers"])
            else:
                needed = int(section["rule"]["min_peers"])
                slow = "not judged (%d host%s, %d needed)" % (table["n"], "" if table["n"] == 1 else "s", needed)
            rows.append((key, table["class"], table["metric"], table["n"], table["median"], table["min"], table["max"], slow,
                         bool(table["stragglers"])))
    return rows


def workload_failure_rows(report: Mapping[str, Any]) -> list[WorkloadFailureRow]:
    """One row per failed host x workload row (FAILURE, TIMEOUT, unreadable performance)."""
    rows: list[WorkloadFailureRow] = []
    for key, work in sorted((workloads(report).get("workloads") or {}).items()):
        for failure in work["failures"]:
            rows.append((key, failure["host"], failure["class"], str(failure["status"]), str(failure["reason"] or ""),
                         (failure.get("log") or [""])[-1]))
    return rows


# (host, class, lowest score, [(gpu, score, nearest NIC and link "mlx5_0 SYS" or "-")]) for hosts with GPUs below
PlacementRow = tuple[str, Optional[str], float, list[tuple[str, float, str]]]


def placement(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report's ``placement`` section (_fleet/placement.py), {} when no host has a placement score."""
    return report.get("placement") or {}


def placement_rows(report: Mapping[str, Any]) -> list[PlacementRow]:
    """One row per host with a GPU below the threshold, lowest score first: its GPUs below, each with its nearest NIC."""
    section = placement(report)
    per_host: dict[str, list[tuple[str, float, str]]] = {}
    for item in section.get("below") or []:
        nic = " ".join(str(v) for v in (item.get("nearest_nic"), item.get("nic_link")) if v) or "-"
        per_host.setdefault(item["host"], []).append((item["gpu"], item["score"], nic))
    hosts = section.get("hosts") or {}
    return sorted(((host, hosts[host]["class"], hosts[host]["lowest"], gpus) for host, gpus in per_host.items()),
                  key=lambda r: (r[2], r[0]))


def placement_line(report: Mapping[str, Any]) -> str:
    """One sentence: hosts with GPUs below the threshold, the worst GPU, the class medians, hosts left unscored."""
    section = placement(report)
    if not section:
        return ""
    rows = placement_rows(report)
    scored = len(section["hosts"])
    text = "GPU placement: %d of %d scored host%s with GPUs below %s" % (
        len(rows), scored, "" if scored == 1 else "s", number(section["threshold"]))
    if rows:
        gpu, score, nic = rows[0][3][0]
        text += " (lowest: %s %s %s, nearest NIC %s)" % (rows[0][0], gpu, number(score), nic)
    medians = ", ".join("%s %s" % (klass, number(c["median"])) for klass, c in sorted(section["classes"].items()))
    if medians:
        text += "; class median %s" % medians
    if section["unscored"]:
        text += "; %d host%s not scored" % (len(section["unscored"]), "" if len(section["unscored"]) == 1 else "s")
    return text


# ---------------------------------------------------------------- interconnect (_fleet/interconnect.py)

# (status, host, subject, counter, rate "250/hour" or "+2", limit "120/hour" or "any increase", interval "2.0 h")
InterconnectRow = tuple[str, str, str, str, str, str, str]


def interconnect(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report's ``analysis.interconnect`` section, {} when no host read an interconnect counter."""
    return analysis(report).get("interconnect") or {}


def _rate_text(row: Mapping[str, Any]) -> tuple[str, str]:
    if row["unit"] == "count":
        return "+%d" % row["delta"], "more than %s" % number(row["limit"]) if row["limit"] else "any increase"
    return "%s%s/%s" % ("at least " if row.get("at_least") else "", number(row["rate"]), row["unit"]), \
        "%s/%s" % (number(row["limit"]), row["unit"])


def interconnect_rate_rows(report: Mapping[str, Any]) -> list[InterconnectRow]:
    """The ports, links and devices whose counters grew since the last run, worst first (breaches, then the rest)."""
    rows = []
    for row in interconnect(report).get("rates") or []:
        rate, limit = _rate_text(row)
        rows.append((row["status"], row["host"], row["subject"], row["counter"], rate, limit, "%.1f h" % row["interval_h"]))
    return rows


def interconnect_flap_rows(report: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(host, port or GPU, what changed) for each flap since the last run."""
    return [(f["host"], f["subject"], f["change"]) for f in interconnect(report).get("flaps") or []]


def interconnect_peer_rows(report: Mapping[str, Any]) -> list[tuple[str, str, str, str, str, str]]:
    """(status, host, port, what it is, what its class has, peers that have it so) for each port off its peers."""
    rows = []
    for peer in interconnect(report).get("peers") or []:
        expected = "ACTIVE at %s Gb/s" % number(peer["expected_rate_gbps"]) if peer["expected_rate_gbps"] is not None else "ACTIVE"
        rows.append((peer["status"], peer["host"], peer["subject"], peer["problem"],
                     "%s on %d of %d hosts" % (expected, peer["peers_up"], peer["hosts"]), ", ".join(peer["peers"])))
    return rows


def interconnect_domain_rows(report: Mapping[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(host, NVLink domain, what its GPUs report, the domain's cluster and clique, hosts that agree) per host off its rack group."""
    return [(o["host"], o["domain"], o["seen"], "cluster %s clique %s" % (o["expected_cluster_uuid"], o["expected_clique_id"]),
             ", ".join(o["peers"])) for o in (interconnect(report).get("nvlink_domains") or {}).get("off") or []]


def interconnect_reset_rows(report: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(host, subject, why no rate this run) for each reset interval and each counter that could not be judged."""
    section = interconnect(report)
    rows = [(r["host"], r["subject"], "interval restarted: %s" % r["reason"]) for r in section.get("resets") or []]
    rows.extend((u["host"], "%s %s" % (u["subject"], u["counter"]), u["reason"]) for u in section.get("unknown") or [])
    return rows


def interconnect_line(report: Mapping[str, Any]) -> str:
    """One sentence: hosts read, first readings, resets, breaches, flaps, ports off their peers, hosts off their domain."""
    section = interconnect(report)
    if not section:
        return ""
    hosts = section.get("hosts") or {}
    counts = section.get("counts") or {}
    first = sum(1 for how in hosts.values() if how == "first reading")
    breaches = [r for r in section.get("rates") or [] if r["status"] != PASS]
    parts = ["%d host%s read" % (len(hosts), "" if len(hosts) == 1 else "s")]
    if first:
        parts.append("%d first reading%s (lifetime totals only)" % (first, "" if first == 1 else "s"))
    for key, one, many in (("resets", "reset interval", "reset intervals"), ("flaps", "flap", "flaps"),
                           ("peers", "port off its peers", "ports off their peers")):
        if counts.get(key):
            parts.append("%d %s" % (counts[key], one if counts[key] == 1 else many))
    off = len((section.get("nvlink_domains") or {}).get("off") or [])
    if off:
        parts.append("%d host%s off its NVLink domain" % (off, "" if off == 1 else "s"))
    worst = "; worst: %s %s %s %s" % (breaches[0]["host"], breaches[0]["subject"], breaches[0]["counter"],
                                      _rate_text(breaches[0])[0]) if breaches else ""
    return "Interconnect: %s; %d rate%s over the limit%s" % (", ".join(parts), len(breaches), "" if len(breaches) == 1 else "s", worst)


# ---------------------------------------------------------------- screening coverage (_fleet/coverage.py)

COVERAGE = Table("Screening coverage", (HOSTS_COLUMN, "last screened", "overdue by"))
# Overdue nodes shown one row each, the longest overdue first; the rest are one row, their names collapsed as a large
# group's are (Markdown: the first names and "+M more"; HTML: <details>), so the table stays short at 10,000 nodes.
OVERDUE_SHOWN = 20


class CoverageRow(NamedTuple):
    """One row of the coverage table: one node, or a group of them (the never screened, the overdue beyond the first)."""

    hosts: list[str]
    last_screened: str
    overdue_by: str


def screening(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report's ``screening`` section (playbooks/screen.yml runs), {} otherwise."""
    return report.get("screening") or {}


def when(stamp: Optional[str]) -> str:
    """An ISO time as people read it: "2026-11-22 13:00" (UTC offset dropped; the report's generated_at has it)."""
    return str(stamp)[:16].replace("T", " ") if stamp else "-"


def duration(seconds: float) -> str:
    """2.5 days, 5.0 h, 12 min."""
    if seconds >= 86400:
        return "%.1f days" % (seconds / 86400.0)
    if seconds >= 3600:
        return "%.1f h" % (seconds / 3600.0)
    return "%d min" % round(seconds / 60.0)


def coverage_line(report: Mapping[str, Any]) -> str:
    """One sentence: how many nodes were screened within N days, how many are overdue or never screened ("" without
    a screening section)."""
    section = screening(report)
    if not section:
        return ""
    text = "%d of %s screened within %g days" % (section["within"], plural_of(section["nodes"], "node"), section["max_age_days"])
    if section["overdue"]:
        worst = section["overdue"][0]
        text += "; %d overdue (longest: %s by %s)" % (len(section["overdue"]), worst["host"], duration(worst["overdue_by_s"]))
    if section["never"]:
        text += "; %d never screened" % len(section["never"])
    if section["covered"]:
        text += ": every node is covered"
    return "Screening: " + text


def coverage_rows(report: Mapping[str, Any]) -> list[CoverageRow]:
    """The nodes not covered: the never screened (one row), then the overdue longest first, OVERDUE_SHOWN one row each
    and the rest one row (the range of their last screens and of how long they are overdue)."""
    section = screening(report)
    rows: list[CoverageRow] = []
    if section.get("never"):
        rows.append(CoverageRow(list(section["never"]), "never", "never screened"))
    overdue = section.get("overdue") or []
    rows.extend(CoverageRow([o["host"]], when(o["last_screened"]), duration(o["overdue_by_s"])) for o in overdue[:OVERDUE_SHOWN])
    rest = overdue[OVERDUE_SHOWN:]
    if rest:  # longest overdue first: rest[0] was screened earliest
        rows.append(CoverageRow([o["host"] for o in rest], "%s to %s" % (when(rest[0]["last_screened"]), when(rest[-1]["last_screened"])),
                                "%s to %s" % (duration(rest[-1]["overdue_by_s"]), duration(rest[0]["overdue_by_s"]))))
    return rows

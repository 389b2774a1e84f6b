# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Rows the human-readable formats share (terminal, Markdown, HTML), so they all say the same thing.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._status import ERRORED, FAIL, FAILED, HEALTHY, PASS, UNREACHABLE, WARNING
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import MISSING, NOT_JUDGED, TASK_FAILED, UNCHECKED

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
    parts = ["GPU %s" % gpu.get("index")]
    if gpu.get("pci_bus_id"):
        parts.append(gpu["pci_bus_id"])
    if gpu.get("uuid"):
        parts.append(gpu["uuid"])
    return " ".join(parts)


def analysis(report: Mapping[str, Any]) -> dict[str, Any]:
    return report.get("analysis") or {}


def host_rows(report: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(host, entry) sorted worst status first, then by name."""
    rank = {s: i for i, s in enumerate(STATUS_ORDER)}
    return sorted(report["hosts"].items(), key=lambda kv: (rank.get(kv[1]["status"], len(rank)), kv[0]))


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
                (check_id, entry["status"], message, [gpu_label(g) for g in entry.get("gpus") or []]))
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
            rows.append((slow["host"], gpu_label(slow), slow["class"], finding["metric"], finding["value"], finding["median"],
                         percent_change(finding["ratio"])))
    rows.sort(key=lambda r: (r[0], r[1], r[3]))
    return rows


def drift_rows(report: Mapping[str, Any]) -> list[DriftRow]:
    """(host, class, field, value, reference, basis, gpu labels) per drifting field, then per drifting Python
    package of env_setup's virtualenv (field "package <name>", None for not installed)."""
    drift = analysis(report).get("drift") or {}
    rows: list[DriftRow] = [(i["host"], i["class"], i["field"], i["value"], i["reference"], i["basis"],
                             ["GPU %s: %s" % (g["index"], g["value"]) for g in i.get("gpus") or []]) for i in drift.get("items") or []]
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


# (host, GPU label or "", check id, worst status, first seen, last seen, times seen, escalation action or "", why or "")
FindingRow = tuple[str, str, str, str, str, str, int, str, str]


def open_finding_rows(report: Mapping[str, Any]) -> list[FindingRow]:
    """The open findings (report["findings"], kept across runs until acknowledged), in the report's order."""
    rows: list[FindingRow] = []
    for item in report.get("findings") or []:
        if not item.get("open"):
            continue
        gpu = "GPU %s %s" % (item.get("gpu_index"), item["gpu_uuid"]) if item.get("gpu_uuid") else item.get("subject") or ""
        step = item.get("escalation") or {}
        rows.append((item["host"], gpu, item["check_id"], item["status"], str(item.get("first_seen") or "")[:10],
                     str(item.get("last_seen") or "")[:10], int(item.get("times_seen") or 0), step.get("action") or "",
                     step.get("why") or ""))
    return rows


def findings_store_problems(report: Mapping[str, Any]) -> list[str]:
    """Why the findings store was set aside or not updated this run (report["findings_store"]), one line each."""
    return [str(p) for p in (report.get("findings_store") or {}).get("problems") or []]


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

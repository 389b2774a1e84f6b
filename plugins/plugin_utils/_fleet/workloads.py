# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Workloads across the fleet: per workload, per hardware class, the spread and the stragglers (pure).

Input is each host's ``workload`` entry (FleetCollector.add_workload: the rows of continuum.hydra.workload's
run mode, with the host's GPU count and vendor). A row's ``performance`` is the number as the model printed
it, a string: a SUCCESS row whose performance is not a finite number is a failure ("unreadable performance"),
never a value. FAILURE and TIMEOUT rows are failures, with their reason and the end of their log; SKIPPED rows
are listed apart (the host did not offer what the model needs).

Values are grouped by workload, then by (class, metric): a host's class is its fleet class (classes.py,
set by analysis.py), else - a workload-only run has no doctor or profile to classify by - its GPU count and
vendor as the workload run saw them. Each group gets n, median, min and max; stragglers are judged with the
straggler rule of stragglers.py (robust z and ratio to the median), with ``min_peers`` 3 instead of 5: a
workload is one figure per host and classes of a workload run are small. A host that ran the same workload
twice (two tasks, or a tag selecting it twice) counts with the median of its values. The same name run with
different args on different rows is two workloads, ``name args``.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import math
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._status import RUN_FAILURE, RUN_SKIPPED, RUN_STATUSES, RUN_SUCCESS, RUN_TIMEOUT
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.facts import NO_GPU
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.figures import gpu_records, lower_is_better
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.stats import median
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.stragglers import DEFAULT_RULE
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.stragglers import judge as judge_stragglers

WORKLOADS_KIND = "continuum.hydra.workloads"
RULE: dict[str, float] = dict(DEFAULT_RULE, min_peers=3)
LOG_EXCERPT_LINES = 5
UNREADABLE = "unreadable performance"
# The figure name the batch plan reads a workload's throughput under (figures.py: a rate, higher is better).
BATCH_FIGURE = "workload_throughput_per_s"
# Row fields a host entry keeps (the telemetry and phases stay in the task result).
KEPT_FIELDS = ("name", "args", "status", "performance", "metric", "duration_s", "exit_code", "runtime", "timeout_s", "reason")
KEPT_LOG_LINES = 10


def host_entry(result: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """What a host's fleet entry keeps of a workload task's result; None when it ran nothing (discover mode,
    check mode, a crash): {catalogue, tags, gpus, gpu_vendor, rows [{KEPT_FIELDS, log_tail, gpu_name}]}."""
    rows = result.get("workloads")
    if result.get("mode") != "run" or not isinstance(rows, list) or not isinstance(result.get("summary"), dict):
        return None
    kept = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        entry = dict((key, row.get(key)) for key in KEPT_FIELDS)
        tail = row.get("log_tail")
        entry["log_tail"] = [str(line) for line in tail[-KEPT_LOG_LINES:]] if isinstance(tail, list) else []
        gpus = (row.get("telemetry") or {}).get("gpus") if isinstance(row.get("telemetry"), dict) else None
        names = [g.get("name") for g in gpus or [] if isinstance(g, dict) and g.get("name")]
        entry["gpu_name"] = names[0] if names else None
        kept.append(entry)
    tags = result.get("tags")
    return {"catalogue": result.get("catalogue"), "tags": [str(t) for t in tags] if isinstance(tags, list) else [],
            "gpus": result.get("gpus"), "gpu_vendor": result.get("gpu_vendor"), "rows": kept}


def merge_entries(old: Optional[Mapping[str, Any]], new: Mapping[str, Any]) -> dict[str, Any]:
    """Two workload tasks on one host: one entry, rows in the order they ran."""
    if not old:
        return dict(new)
    merged = dict(new)
    merged["rows"] = list(old.get("rows") or []) + list(new.get("rows") or [])
    merged["tags"] = list(old.get("tags") or []) + [t for t in new.get("tags") or [] if t not in (old.get("tags") or [])]
    return merged


def performance_value(text: object) -> Optional[float]:
    """The performance a model printed, as a finite float; None when it is not one ("0-15", "", None, "nan")."""
    if isinstance(text, bool) or text is None:
        return None
    try:
        value = float(str(text).strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def workload_class(entry: Mapping[str, Any]) -> str:
    """The class of a host the fleet could not classify: its GPU count and vendor as the workload run saw them."""
    work = entry.get("workload") or {}
    gpus = work.get("gpus")
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus <= 0:
        return NO_GPU
    return "%d %sGPU%s" % (gpus, "%s " % work["gpu_vendor"] if work.get("gpu_vendor") else "", "" if gpus == 1 else "s")


def _keys(hosts: Mapping[str, Mapping[str, Any]]) -> dict[str, set[str]]:
    """name -> the distinct args it ran with across the fleet."""
    args: dict[str, set[str]] = {}
    for entry in hosts.values():
        for row in (entry.get("workload") or {}).get("rows") or []:
            args.setdefault(str(row.get("name")), set()).add(str(row.get("args") or ""))
    return args


def _excerpt(row: Mapping[str, Any]) -> list[str]:
    return [str(line) for line in (row.get("log_tail") or [])[-LOG_EXCERPT_LINES:]]


def analyse_workloads(hosts: Mapping[str, Mapping[str, Any]], host_class: Optional[Mapping[str, Optional[str]]] = None,
                      rule: Optional[Mapping[str, float]] = None) -> Optional[dict[str, Any]]:
    """The report's ``workloads`` section, or None when no host ran a workload.

    hosts: the report's host entries (each may have ``workload``); host_class: {host: fleet class or None}
    (default: each entry's ``class``). Returns {kind, rule, hosts, counts, workloads: {key: {name, args,
    metric, tables, failures, skipped}}, results}; ``results`` has one item per host and row, with the class,
    the parsed value, whether the row failed or is a straggler, and ``run`` (1, or 2 for the host's second run of
    that workload), in host then run order.
    """
    rule = dict(RULE, **(rule or {}))
    ran = sorted(h for h, e in hosts.items() if isinstance(e.get("workload"), dict))
    if not ran:
        return None
    distinct = _keys(hosts)
    counts = dict((status, 0) for status in RUN_STATUSES)
    counts[UNREADABLE] = 0
    workloads: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []
    values: dict[str, dict[tuple[str, str], dict[str, list[float]]]] = {}  # key -> (class, metric) -> host -> values
    basis: dict[str, str] = {}
    for host in ran:
        entry = hosts[host]
        fleet_class = host_class.get(host) if host_class is not None else entry.get("class")
        klass = fleet_class or workload_class(entry)
        basis[klass] = "class" if fleet_class else "workload"
        runs: dict[str, int] = {}
        for row in entry["workload"].get("rows") or []:
            name, args = str(row.get("name")), str(row.get("args") or "")
            key = name if len(distinct.get(name, ())) < 2 else ("%s %s" % (name, args)).strip()
            work = workloads.setdefault(key, {"name": name, "args": args, "metrics": [], "tables": [], "failures": [],
                                              "skipped": []})
            status = row.get("status")
            value = performance_value(row.get("performance"))
            metric = str(row.get("metric") or "")
            runs[key] = runs.get(key, 0) + 1
            item = {"host": host, "workload": key, "run": runs[key], "class": klass, "status": status, "value": None,
                    "metric": metric or None,
                    "duration_s": row.get("duration_s"), "failure": False, "straggler": False, "reason": row.get("reason")}
            if status == RUN_SUCCESS and value is not None and metric:
                item["value"] = value
                values.setdefault(key, {}).setdefault((klass, metric), {}).setdefault(host, []).append(value)
                if metric not in work["metrics"]:
                    work["metrics"].append(metric)
                counts[RUN_SUCCESS] += 1
            elif status == RUN_SKIPPED:
                work["skipped"].append({"host": host, "reason": row.get("reason")})
                counts[RUN_SKIPPED] += 1
            else:
                if status == RUN_SUCCESS:
                    reason = "%s: %r%s" % (UNREADABLE, row.get("performance"), "" if metric else " with no metric")
                    counts[UNREADABLE] += 1
                elif status in (RUN_FAILURE, RUN_TIMEOUT):
                    reason = row.get("reason") or "exit code %s" % row.get("exit_code")
                    counts[status] += 1
                else:
                    reason = "unknown status %r; accepted: %s" % (status, ", ".join(RUN_STATUSES))
                    counts[RUN_FAILURE] += 1
                item.update(failure=True, reason=reason)
                work["failures"].append({"host": host, "class": klass, "status": status, "reason": reason, "log": _excerpt(row)})
            results.append(item)
    slow_hosts: set[tuple[str, str, str]] = set()
    for key, groups in values.items():
        samples = dict((group, [(h, median(v)) for h, v in sorted(per_host.items())]) for group, per_host in groups.items())
        _dist, slow, _small = judge_stragglers(samples, rule)
        for (klass, metric), pairs in sorted(samples.items()):
            numbers = sorted(v for _host, v in pairs)
            judged = len(pairs) >= rule["min_peers"]
            stragglers = [dict(finding, host=h) for h, _v in pairs for finding in slow.get(h, [])
                          if finding["metric"] == metric] if judged else []
            for straggler in stragglers:
                slow_hosts.add((key, straggler["host"], metric))
            workloads[key]["tables"].append({
                "class": klass, "basis": basis[klass], "metric": metric, "hosts": [h for h, _v in pairs], "n": len(pairs),
                "median": median(numbers), "min": numbers[0], "max": numbers[-1], "judged": judged,
                "stragglers": stragglers})
    for item in results:
        item["straggler"] = (item["workload"], item["host"], item["metric"]) in slow_hosts
    return {"kind": WORKLOADS_KIND, "rule": rule, "hosts": ran, "counts": counts,
            "workloads": dict((key, workloads[key]) for key in sorted(workloads)), "results": results}


def batch_profiles(hosts: Mapping[str, Mapping[str, Any]], workload: str) -> Optional[dict[str, dict[str, Any]]]:
    """Profile-like summaries for the batch plan from a workload's results: {host: {figures: {BATCH_FIGURE:
    throughput}, gpus}} for each host with a successful, readable row of ``workload`` (its name, or its
    ``name args`` key); None when no host has one (the plan then reads the profile figure of that name).

    A time metric (figures.lower_is_better: ``step_time_ms``) becomes its inverse. The GPUs are the host's
    profiled GPU records when it was profiled (their memory bounds the plan), else as many as the workload run
    offered its models.
    """
    out: dict[str, dict[str, Any]] = {}
    for host in sorted(hosts):
        entry = hosts[host]
        work = entry.get("workload")
        if not isinstance(work, dict):
            continue
        found = []
        for row in work.get("rows") or []:
            if workload not in (row.get("name"), ("%s %s" % (row.get("name"), row.get("args") or "")).strip()):
                continue
            value = performance_value(row.get("performance"))
            if row.get("status") == RUN_SUCCESS and value is not None and value > 0 and row.get("metric"):
                found.append(1.0 / value if lower_is_better(str(row["metric"])) else value)
        if not found:
            continue
        gpus = [dict(g, figures={}) for g in gpu_records(entry.get("profile"))]
        count = work.get("gpus")
        if not gpus and isinstance(count, int) and not isinstance(count, bool) and count > 0:
            gpus = [{"index": i, "uuid": None, "name": work.get("gpu_vendor"), "memory_total_mib": None, "figures": {}}
                    for i in range(count)]
        out[host] = {"figures": {BATCH_FIGURE: median(found)}, "gpus": gpus}
    return out or None

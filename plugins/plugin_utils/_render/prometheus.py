# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fleet report as a Prometheus textfile, for node_exporter's textfile collector.

Gauges only, no timestamps (the textfile collector refuses them). Label values are escaped as the
text format requires (backslash, double quote, line feed). Per-check results are sparse: a series
exists for each WARN/FAIL/ERROR only; hydra_host_checks has every host's counts per status.
docs/grafana/hydra-fleet.json is a dashboard over these metrics.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import functools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ansible_collections.continuum.hydra.plugins.module_utils._status import ALL_HOST_STATUSES, PROBLEMS, STATUSES
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.figures import gpu_figures, gpu_records, host_figures
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import reported_checks
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _views as views
from ansible_collections.continuum.hydra.plugins.plugin_utils._render._text import printable

PREFIX = "hydra_"


Labels = Sequence[tuple[str, object]]
Sample = tuple[Labels, float]

_ESCAPES = {ord("\\"): "\\\\", ord('"'): '\\"', ord("\n"): "\\n"}


def label_value(value: object) -> str:
    return _escaped("" if value is None else str(value))


@functools.lru_cache(maxsize=1 << 16)  # host names, classes and metric names repeat on every line
def _escaped(text: str) -> str:
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return printable(text, keep="\t\n").translate(_ESCAPES)


def sample_value(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return "%d" % value
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _sample(name: str, labels: Labels, value: float) -> str:
    if labels:
        return "%s%s{%s} %s\n" % (PREFIX, name, ",".join('%s="%s"' % (k, label_value(v)) for k, v in labels), sample_value(value))
    return "%s%s %s\n" % (PREFIX, name, sample_value(value))


def _family(name: str, help_text: str, samples: Iterable[Sample]) -> Iterator[str]:
    """The HELP and TYPE lines, then the samples: (labels, value) pairs."""
    yield "# HELP %s%s %s\n# TYPE %s%s gauge\n" % (PREFIX, name, help_text, PREFIX, name)
    batch = []
    for labels, value in samples:
        batch.append(_sample(name, labels, value))
        if len(batch) == 1000:  # fewer, larger writes
            yield "".join(batch)
            batch = []
    yield "".join(batch)


def _timestamp(generated_at: str) -> float:
    try:
        return datetime.datetime.fromisoformat(generated_at).timestamp()
    except (TypeError, ValueError):
        return float("nan")


def _host_statuses(report: Mapping[str, Any], statuses: Sequence[str]) -> Iterator[Sample]:
    for host, entry in sorted(report["hosts"].items()):
        for status in statuses:
            yield [("host", host), ("class", entry.get("class") or ""), ("status", status)], int(entry["status"] == status)


def _host_checks(report: Mapping[str, Any]) -> Iterator[Sample]:
    for host, entry in sorted(report["hosts"].items()):
        doctor = entry.get("doctor")
        if doctor is None:
            continue
        counts = dict.fromkeys(STATUSES, 0)
        for chk in doctor.get("checks") or []:
            if chk.get("status") in counts:
                counts[chk["status"]] += 1
        for status in STATUSES:
            yield [("host", host), ("status", status)], counts[status]


def _check_problems(report: Mapping[str, Any]) -> Iterator[Sample]:
    for host, entry in sorted(report["hosts"].items()):
        for chk in reported_checks(entry):
            if chk.get("status") in PROBLEMS:
                yield [("host", host), ("check", chk.get("id")), ("status", chk["status"])], 1


def _benchmarks(report: Mapping[str, Any], gpus: bool) -> Iterator[Sample]:
    for host, entry in sorted(report["hosts"].items()):
        klass = entry.get("class") or ""
        if not gpus:
            for metric, value in sorted(host_figures(entry.get("profile")).items()):
                yield [("host", host), ("class", klass), ("metric", metric)], value
            continue
        for gpu in gpu_records(entry.get("profile")):
            for metric, value in sorted(gpu_figures(gpu).items()):
                yield [("host", host), ("class", klass), ("gpu_index", gpu.get("index")), ("gpu_uuid", gpu.get("uuid") or ""),
                       ("metric", metric)], value


def _stragglers(analysis: Mapping[str, Any]) -> Iterator[Sample]:
    stragglers = analysis.get("stragglers") or {}
    for slow in stragglers.get("hosts") or []:
        for finding in slow["metrics"]:
            yield [("host", slow["host"]), ("class", slow["class"]), ("gpu_index", ""), ("gpu_uuid", ""),
                   ("metric", finding["metric"])], finding["ratio"] if finding["ratio"] is not None else 0.0
    for slow in stragglers.get("gpus") or []:
        for finding in slow["metrics"]:
            yield [("host", slow["host"]), ("class", slow["class"]), ("gpu_index", slow["index"]), ("gpu_uuid", slow["uuid"]),
                   ("metric", finding["metric"])], finding["ratio"] if finding["ratio"] is not None else 0.0


def _run(labels: list[tuple[str, object]], result: Mapping[str, Any]) -> Labels:
    """A workload's second run on the same host is its own series: label run="2"."""
    return labels + [("run", result["run"])] if result["run"] > 1 else labels


def _interconnect_families(section: Mapping[str, Any]) -> list[tuple[str, str, Iterable[Sample]]]:
    """Per port, link and PCI function: the error rate since the last run, its limit, flaps, ports off their peers."""
    if not section:
        return []
    rates = section.get("rates") or []

    def rate_labels(row: Mapping[str, Any]) -> list[tuple[str, object]]:
        return [("host", row["host"]), ("kind", row["kind"]), ("subject", row["subject"]), ("counter", row["counter"]),
                ("unit", row["unit"])]
    return [
        ("interconnect_error_rate", "Increase of an interconnect error counter since the host's last run, per unit (unit "
         "label: second, minute or hour; count: the increase itself), for each port, NVLink link or PCI function whose "
         "counter grew (docs/interconnect.md).", ((rate_labels(r), r["rate"]) for r in rates)),
        ("interconnect_error_limit", "The limit the rate is judged against (the host's hydra_expect or the default).",
         ((rate_labels(r), r["limit"]) for r in rates)),
        ("interconnect_over_limit", "1 when the rate is over its limit, labelled with the status it gets (WARN, FAIL).",
         ((rate_labels(r) + [("status", r["status"])], 1) for r in rates if r["status"] in PROBLEMS)),
        ("interconnect_flap", "1 for a port whose state or link_downed changed, or an NVLink link that went down or came "
         "back, since the host's last run.", (([("host", f["host"]), ("kind", f["kind"]), ("subject", f["subject"])], 1)
                                              for f in section.get("flaps") or [])),
        ("interconnect_peer_port", "1 for a port down, missing or slower on this host while most of its class has it ACTIVE.",
         (([("host", p["host"]), ("subject", p["subject"]), ("status", p["status"])], 1) for p in section.get("peers") or [])),
    ]


def _fabric_families(report: Mapping[str, Any]) -> list[tuple[str, str, Iterable[Sample]]]:
    """Per host, the fabric test's figure and verdict (playbooks/fabric.yml, docs/fabric.md); nothing without one."""
    fabric = report.get("fabric") or {}
    if not fabric:
        return []
    figures = []
    for host in fabric["hosts"]:
        check = next((c for c in reported_checks(report["hosts"].get(host) or {}) if c.get("id") == "fabric.collective"), None)
        busbw = ((check or {}).get("details") or {}).get("busbw_gbps")
        if check is not None and busbw is not None:
            figures.append(([("host", host), ("status", check["status"])], busbw))
    isolated = {item["host"]: item for item in fabric["isolated"]}
    return [
        ("fabric_busbw_gbps", "All-reduce bus bandwidth (GB/s, largest size) of the host's group that proves its verdict: "
         "its best passing group, or the failing group that names it.", figures),
        ("fabric_isolated", "1 for a host the fabric test isolated as slow (the proof is in the fleet report's fabric section).",
         (([("host", h)], 1 if h in isolated else 0) for h in fabric["hosts"])),
        ("fabric_error", "1 for a host whose rank did not join, was lost mid-collective or was unreachable in the fabric test.",
         (([("host", e["host"]), ("kind", e["kind"])], 1) for e in fabric["errors"])),
        ("fabric_rounds", "Rounds the fabric test took.", [([], fabric["round_count"])]),
        ("fabric_not_tested_busy", "1 for a host the fabric test left out because the idle guard found it busy (a GPU "
         "compute process or a SLURM job; the reason is in the fleet report's fabric section).",
         (([("host", item["host"])], 1) for item in fabric.get("busy") or [])),
    ]


def _screening_families(section: Mapping[str, Any]) -> list[tuple[str, str, Iterable[Sample]]]:
    """Screening coverage (playbooks/screen.yml, docs/screening.md): each node's age since its last screen, the overdue
    ones by how long, the never screened, the window; nothing outside screening runs."""
    if not section:
        return []
    return [
        ("screening_max_age_seconds", "The coverage window: every node should be screened within this many seconds.",
         [([], section["max_age_days"] * 86400.0)]),
        ("node_screened_age_seconds", "Seconds since the node was last screened (a screening job ran and judged it), at the "
         "report's time; a node never screened has no series.",
         (([("host", host)], age) for host, age in sorted((section.get("screened_age_s") or {}).items()))),
        ("node_screening_overdue_seconds", "How long past the coverage window the node's last screen is (overdue nodes only).",
         (([("host", o["host"])], o["overdue_by_s"]) for o in section["overdue"])),
        ("node_never_screened", "1 for a node the screening store has no screen of.", (([("host", h)], 1) for h in section["never"])),
    ]


def render(report: Mapping[str, Any]) -> Iterator[str]:
    """The textfile in pieces."""
    analysis = views.analysis(report)
    totals = report["totals"]
    statuses = [s for s in ALL_HOST_STATUSES if s in totals]
    families: list[tuple[str, str, Iterable[Sample]]] = [
        ("fleet_report_timestamp_seconds", "When the fleet report was generated (Unix time).",
         [([], _timestamp(report["generated_at"]))]),
        ("fleet_hosts", "Hosts in the fleet report by status.", [([("status", s)], totals[s]) for s in statuses]),
        ("host_status", "1 for the host's status in the fleet report, 0 for the others.", _host_statuses(report, statuses)),
        ("host_checks", "Number of doctor checks of the host with each status.", _host_checks(report)),
        ("check_hosts", "Number of hosts with each status for a doctor check.",
         (([("check", cid), ("status", s)], n) for cid, counts in sorted(report["checks"].items()) for s, n in sorted(counts.items()))),
        ("host_check_problem", "1 for each doctor check of a host that is WARN, FAIL or ERROR (a check blocked by a root cause is not).",
         _check_problems(report)),
        ("host_root_blocked_checks", "Checks of the host blocked by this root cause (a failed probe the root check reports).",
         (([("host", h), ("check", cid), ("status", st)], n) for h, cid, st, _message, n in views.root_rows(report))),
        ("benchmark_value", "Host benchmark figure from the profile (unit in the metric name).", _benchmarks(report, False)),
        ("gpu_benchmark_value", "GPU benchmark figure from the profile (unit in the metric name).", _benchmarks(report, True)),
        ("straggler_ratio", "Straggler's figure relative to its class median (1 = typical, lower = slower).", _stragglers(analysis)),
        ("host_drift", "1 for each configuration field where the host differs from its class majority or the expected value.",
         (([("host", h), ("class", c), ("field", f), ("value", v), ("expected", r)], 1) for h, c, f, v, r, _basis, _gpus
          in views.drift_rows(report))),
    ]
    results = views.workloads(report).get("results") or []
    if results:
        families.append(("workload_performance", "Workload performance as the model printed it (unit in the metric label).",
                         ((_run([("host", r["host"]), ("workload", r["workload"]), ("metric", r["metric"])], r), r["value"])
                          for r in results if r["value"] is not None)))
        families.append(("workload_status", "1 for each workload row of the host, labelled with its status (SUCCESS, FAILURE, "
                         "SKIPPED, TIMEOUT) and failure (true also for a SUCCESS whose performance is unreadable).",
                         ((_run([("host", r["host"]), ("workload", r["workload"]), ("status", r["status"] or ""),
                                 ("failure", "true" if r["failure"] else "false")], r), 1) for r in results)))
        families.append(("workload_straggler", "1 when the host's workload performance is a straggler of its class.",
                         ((_run([("host", r["host"]), ("workload", r["workload"]), ("class", r["class"])], r), int(r["straggler"]))
                          for r in results if r["value"] is not None)))
    placed = views.placement(report).get("hosts") or {}
    if placed:
        families.append(("gpu_placement_score", "GPU placement score, 0 to 100 (NUMA and PCIe distance to the nearest NIC and "
                         "to the job's CPUs; docs/topology.md).",
                         (([("host", host), ("gpu", g["gpu"])], g["score"]) for host, entry in sorted(placed.items())
                          for g in entry["gpus"] if g["score"] is not None)))
    families.extend(_interconnect_families(views.interconnect(report)))
    families.extend(_fabric_families(report))
    families.extend(_screening_families(views.screening(report)))
    history = analysis.get("history") or {}
    if history:
        families.append(("repeat_offender_runs", "Runs of the retained history in which this GPU or host failed.",
                         (([("host", o["host"]), ("gpu_uuid", o["uuid"] or ""), ("gpu_index", "" if o["index"] is None else o["index"])],
                           o["runs_failed"]) for o in history["repeat_offenders"])))
    bottleneck = analysis.get("bottleneck") or {}
    if bottleneck.get("by_bottleneck"):
        families.append(("bottleneck_hosts", "Hosts whose profile verdict names this primary bottleneck.",
                         (([("bottleneck", g["bottleneck"])], g["host_count"]) for g in bottleneck["by_bottleneck"])))
    plan = analysis.get("batch_plan") or {}
    if plan and not plan.get("error"):
        families.append(("batch_plan_expected_speedup", "Expected step-time speedup of the batch plan over uniform batches.",
                         [([], plan["expected_speedup"])]))
        families.append(("batch_plan_gpu_batch_size", "Per-GPU batch size in the batch plan.",
                         (([("host", host), ("gpu_index", g["index"]), ("gpu_uuid", g["uuid"])], g["batch_size"])
                          for host, entry in sorted(plan["hosts"].items()) for g in entry["gpus"])))
    for name, help_text, samples in families:
        yield from _family(name, help_text, samples)

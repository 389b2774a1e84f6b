# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Fleet analysis of a built fleet report: classes, drift, stragglers, bottleneck, batch plan, history (pure).

analyse() adds ``analysis`` to the report and each host's ``class``; every part is a pure function of
the report and the options (history snapshots are passed in, already read).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import contextlib
import gc
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._status import HOST_STATUSES, OPTIONAL_STATUSES
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import history as history_mod
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.batch_plan import DEFAULT_METRIC, plan_batches
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.bottleneck import analyse_bottleneck
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.checker import raise_alarm
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.classes import classify, count_peer_groups
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.drift import analyse_drift
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.env_drift import environment_drift
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.error_counters import analyse_error_counters
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.facts import host_facts
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.figures import gpu_records
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.interconnect import analyse_interconnect
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.placement import DEFAULT_THRESHOLD, analyse_placement
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import add_actions
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.stragglers import analyse_stragglers, merge_history
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.workloads import BATCH_FIGURE, analyse_workloads, batch_profiles

GPU_IDENTITY = ("uuid", "pci_bus_id", "memory_total_mib")


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the end-of-play work (and for parsing merged slices), then restore it.

    The analysis, the renderers and a merge's JSON parsing allocate millions of small objects next to the run's host
    results; every full collection walks all of them, so with the collector on the cost per host grows with the fleet
    (1.7 x per host at 10,000 hosts vs 1,000 in benchmarks/fleet_analysis.py; merge.yml 1.21 x at 5,000 vs 500). They
    create no reference cycles; reference counting frees everything they drop.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class AnalysisOptions:
    """What the callback's settings ask of the analysis."""

    def __init__(self, class_groups: Iterable[str] = (), host_groups: Optional[Mapping[str, Iterable[str]]] = None,
                 expected: Optional[dict[str, Any]] = None, straggler_rule: Optional[Mapping[str, float]] = None,
                 batch: Optional[Mapping[str, Any]] = None, history: Optional[Iterable[Mapping[str, Any]]] = None,
                 history_rule: Optional[Mapping[str, float]] = None, problems: Iterable[str] = (),
                 straggler_history_runs: Optional[int] = None, placement_threshold: float = DEFAULT_THRESHOLD) -> None:
        self.class_groups = list(class_groups or ())
        self.host_groups = host_groups or {}
        self.expected = expected            # parsed expected-versions file (drift.parse_expected) or None
        # straggler_history_runs: how many runs (this one included) the history straggler rule combines;
        # 0 or 1 turns it off (docs/fleet_analysis.md); None: the rule's default (3)
        if straggler_history_runs is not None:
            straggler_rule = dict(straggler_rule or {}, history_runs=straggler_history_runs)
        self.straggler_rule = straggler_rule
        self.batch = batch                  # {"global_batch_size", "memory_per_sample_mib", "metric"} or None
        self.history = history              # iterable of earlier snapshots, oldest first; None: no history
        self.history_rule = history_rule
        self.problems = list(problems)      # one-line problems found on the way (bad settings, unreadable files)
        self.placement_threshold = placement_threshold  # GPUs with a placement score under it are listed (placement.py)
        self.current_snapshot: Optional[dict[str, Any]] = None        # set by analyse(): this run's history snapshot, for the caller to save


def _class_summaries(classes: dict[str, Any], hosts: Mapping[str, Any]) -> dict[str, Any]:
    statuses = HOST_STATUSES + OPTIONAL_STATUSES
    for info in classes.values():
        counts = dict((s, 0) for s in statuses)
        for host in info["hosts"]:
            counts[hosts[host]["status"]] += 1
        info["status"] = dict((s, n) for s, n in counts.items() if n or s in HOST_STATUSES)
    return classes


def _name_profiled_gpus(entry: Mapping[str, Any]) -> None:
    """A profile may name its GPUs by index only; doctor's environment of the same host has their UUID (which
    history follows) and memory (which bounds the batch plan): copy them over."""
    known = dict((g.get("index"), g) for g in ((entry.get("doctor") or {}).get("environment") or {}).get("gpus") or []
                 if isinstance(g, dict))
    for gpu in gpu_records(entry.get("profile")):
        same = known.get(gpu.get("index"))
        for key in GPU_IDENTITY:
            if same and gpu.get(key) is None and same.get(key) is not None:
                gpu[key] = same[key]


def _history_stragglers(report: Mapping[str, Any], fold: history_mod.HistoryFold, current: Mapping[str, Any],
                        profiles: Mapping[str, Any], host_class: Mapping[str, Optional[str]]) -> None:
    """Judge the stragglers on the last runs too (stragglers.judge_history): this run is scored first, from its
    snapshot's figures (``current``, taken before its straggler flags are), then the stragglers change."""
    fold.score(current, fold.runs + 1)
    slow, judged = fold.history_stragglers(fold.runs + 1)
    if not slow and not judged:
        return
    named = set(owner for kind, owner in slow if kind == "gpu")  # the GPUs merge_history may name: theirs only
    gpu_info = dict((gpu["uuid"], dict(gpu, host=host)) for host, summary in profiles.items()
                    for gpu in gpu_records(summary) if gpu.get("uuid") in named)
    merge_history(report["analysis"]["stragglers"], slow, judged, host_class, gpu_info, fold.straggler_rule)


def _interconnect(report: dict[str, Any], host_class: Mapping[str, Optional[str]],
                  previous: Optional[Mapping[str, str]], stored_readings: Optional[dict[str, str]] = None) -> None:
    """Interconnect rates, flaps, peers and NVLink domains (_fleet/interconnect.py); its actions join the report's.
    ``stored_readings``: filled with each host's reading as the history stores it."""
    section = analyse_interconnect(report["hosts"], host_class, previous, stored_readings)
    report["analysis"]["interconnect"] = section
    if section is not None:
        add_actions(report, section["actions"])
        report["analysis"]["problems"].extend(section["problems"])


def analyse(report: dict[str, Any], options: Optional[AnalysisOptions] = None) -> dict[str, Any]:
    """Add ``analysis`` (and each host's ``class``) to the report; returns the report."""
    options = options or AnalysisOptions()
    hosts = report["hosts"]
    for entry in hosts.values():
        _name_profiled_gpus(entry)
    facts = dict((host, host_facts(entry)) for host, entry in hosts.items())
    host_class, classes = classify(facts, options.host_groups, options.class_groups)
    drift = analyse_drift(facts, host_class, count_peer_groups(facts, host_class, classes), options.expected)
    del facts  # the largest intermediate: gone before the per-metric work
    for host, entry in hosts.items():
        entry["class"] = host_class.get(host)
    profiles = dict((host, entry["profile"]) for host, entry in hosts.items() if isinstance(entry.get("profile"), dict))
    manifests = dict((host, entry["env_setup"]) for host, entry in hosts.items() if isinstance(entry.get("env_setup"), dict))
    fold = None
    if options.history is not None:
        # The earlier runs are folded first, while the analysis holds little else: their snapshots, read one at a
        # time, and the fold's state are its largest memory (benchmarks/fleet_analysis.py).
        rule = dict(history_mod.DEFAULT_RULE, **(options.history_rule or {}))
        fold = history_mod.HistoryFold(rule["ewma_alpha"], options.straggler_rule, host_class)
        for snap in options.history:
            fold.add(snap)
            del snap  # not held while the next one is read
    analysis: dict[str, Any] = {
        "classes": _class_summaries(classes, hosts),
        "unclassified": sorted(h for h, c in host_class.items() if c is None),
        "drift": drift,
        # Python packages of env_setup's virtualenvs, judged against the class majority the same way.
        "env_drift": environment_drift(manifests, dict((h, c) for h, c in host_class.items() if c)) if manifests else None,
        "stragglers": analyse_stragglers(profiles, host_class, options.straggler_rule),
        "bottleneck": analyse_bottleneck(profiles, host_class),
        # ECC / PCIe replay / row-remap counts far above the class's: WARN even under doctor's absolute thresholds.
        "error_counters": analyse_error_counters(hosts, host_class),
        "batch_plan": None,
        "history": None,
        "problems": options.problems,  # the same list: reading the history below may add to it
    }
    workloads = analyse_workloads(hosts, host_class)
    if workloads is not None:
        report["workloads"] = workloads
    report["analysis"] = analysis
    if fold is None:
        _interconnect(report, host_class, None)
    else:
        readings: dict[str, str] = {}
        _interconnect(report, host_class, fold.interconnect, readings)  # against each host's last reading, before this run's
        fold.interconnect = {}  # compared: this run's readings take their place when its snapshot is folded
        # This run's snapshot, once: scored for the stragglers on history, then given the final straggler flags.
        current = history_mod.snapshot(report, readings, stragglers=False)
        del readings
        if fold.window > 1:
            _history_stragglers(report, fold, current, profiles, host_class)
        history_mod.flag_stragglers(current, report)
        options.current_snapshot = current
        fold.add(current, score=False)
        analysis["history"] = fold.result(current, rule)
    # After the history, whose fold and this run's snapshot are the analysis' largest memory: not held beside them.
    placement = analyse_placement(hosts, host_class, options.placement_threshold)
    if placement is not None:
        report["placement"] = placement
    if options.batch:
        metric = options.batch.get("metric") or DEFAULT_METRIC
        # A workload's name (HYDRA_BATCH_METRIC=train_step): its measured throughput instead of a profile figure.
        by_workload = batch_profiles(hosts, metric) if workloads is not None else None
        analysis["batch_plan"] = plan_batches(
            by_workload or profiles, dict((h, e["status"]) for h, e in hosts.items()), options.batch["global_batch_size"],
            options.batch.get("memory_per_sample_mib"), BATCH_FIGURE if by_workload else metric,
            generated_at=report.get("generated_at"), workload=metric if by_workload else None)
    raise_alarm(report)  # last: its action stays first however the others were ranked
    return report

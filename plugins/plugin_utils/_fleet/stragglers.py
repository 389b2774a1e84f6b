# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Stragglers: hosts and GPUs measurably slower than their class (pure).

Input per host is the profile summary, read through _fleet/figures.py: ``figures`` {metric: number} and
``gpus`` [{uuid, index, name, figures}] (a GPU's figures may also sit on the GPU record itself). Metric
names end with their unit; only rates and times are compared (figures.is_performance_metric), and higher
is better unless the name is a time or latency (figures.lower_is_better). For every class and metric with at least ``min_peers``
values:

- ratio = value / class median (median / value for lower-is-better metrics): 1.0 is typical, 0.8 is 20 % slower;
- robust z = (value - median) / (MAD / 0.6745), sign flipped for lower-is-better so negative is slower;
  when MAD is 0 (most values identical) the mean absolute deviation x 1.2533 is the scale.

A value is slow when robust z <= -3.5 and it is at least 10 % worse than the median (ratio <= 0.90), or
when ratio < 0.75 whatever the spread. A straggler is a host (or GPU) with a slow value; the metric
with the lowest ratio is the one that makes it slow.

Judged on history (judge_history, from the scores HistoryFold keeps of each run against the class in
that run; docs/fleet_analysis.md has the why and the measurements): each run's robust z is taken on the larger
of the MAD scale and the scale the group's faster 0.5 % tail implies (stats.tail_scale, ``tail_quantile``), so
heavy-tailed noise widens it where the MAD alone would not. A host or GPU scored in each of the last ``history_runs`` runs (N,
default 3, the current one included) is slow on a metric when either

- a majority of the N runs (2 of 3) are slow: z <= ``history_run_z`` (-3.25) and at least ``history_shortfall``
  (10 %) below the median in that run. One run, however far down, is never a majority: heavy-tailed noise
  makes one run at -25 % common, two independent ones rare; a fault seen in 2 of 3 runs is found; or
- it is a little slow every time: every run's z <= ``history_every_z`` (-1.0), the mean of the runs' z, each
  capped at -``history_z_cap`` (4) so one outlier run cannot carry it, <= ``history_mean_z`` (-2.6: -4.5
  combined as sum / sqrt(3)), and the median ratio at least ``history_shortfall`` below the median. Noise
  averages out over runs, a lasting 15 % shortfall does not.

Where such a history exists it decides: a one-run finding it does not confirm is dropped (unless its ratio is
below ``history_sudden_ratio``, 0 by default: one heavy-tailed run cannot tell a sudden fault from noise, a
fault that stays is found on its second run).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import math
from collections.abc import Container, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Optional, Protocol

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.figures import gpu_figures, gpu_records, host_figures, lower_is_better
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.stats import Spread, median, quantile, tail_scale

DEFAULT_RULE: dict[str, float] = {"robust_z": -3.5, "min_shortfall": 0.10, "ratio_floor": 0.75, "min_peers": 5,
                                  "history_runs": 3, "history_run_z": -3.25, "history_every_z": -1.0, "history_mean_z": -2.6,
                                  "history_z_cap": 4.0, "history_shortfall": 0.10, "history_sudden_ratio": 0.0,
                                  "tail_quantile": 0.995}


# How many runs the history rule combines has its own setting (straggler_history_runs), so that one fact has one place.
RUNS_KEY = "history_runs"


def parse_rule(items: Sequence[Any]) -> dict[str, float]:
    """Rule values over the defaults from "KEY=NUMBER" items (the callback's straggler_rule); ValueError names the bad
    item and what is accepted."""
    rule: dict[str, float] = {}
    accepted = ", ".join(sorted(k for k in DEFAULT_RULE if k != RUNS_KEY))
    for item in items:
        key, _sep, number = str(item).partition("=")
        key = key.strip()
        if key == RUNS_KEY:
            raise ValueError("%r: the number of runs is straggler_history_runs, not a rule value" % (item,))
        if key not in DEFAULT_RULE:
            raise ValueError("%r is not KEY=NUMBER with KEY one of %s" % (item, accepted))
        try:
            value = float(number)
        except ValueError:
            raise ValueError("%r: %r is not a number" % (item, number.strip())) from None
        if not math.isfinite(value):
            raise ValueError("%r: %r is not a finite number" % (item, number.strip()))
        rule[key] = value
    return rule


def _distribution(values: list[float]) -> tuple[Spread, dict[str, Any]]:
    ordered = sorted(values)
    spread = Spread(ordered)
    out = spread.describe()
    out.update(min=ordered[0], max=ordered[-1], p05=quantile(ordered, 0.05), p25=quantile(ordered, 0.25),
               p75=quantile(ordered, 0.75), p95=quantile(ordered, 0.95))
    return spread, out


def _score(value: float, spread: Spread, lower_better: bool, scale: Optional[float] = None) -> tuple[Optional[float], Optional[float]]:
    """(ratio, robust z) of one value; ``scale`` instead of the spread's own when given and larger."""
    centre = spread.median
    if lower_better:
        ratio = centre / value if value > 0 else None
    else:
        ratio = value / centre if centre > 0 else None
    z = (value - centre) / scale if scale is not None and scale > spread.scale else spread.score(value)
    if z is not None and lower_better:
        z = -z
    return ratio, z


def _is_slow(ratio: Optional[float], z: Optional[float], rule: Mapping[str, float]) -> bool:
    if ratio is not None and ratio < rule["ratio_floor"]:
        return True
    return z is not None and z <= rule["robust_z"] and ratio is not None and ratio <= 1.0 - rule["min_shortfall"]


class Pairs(Protocol):
    """A group's (key, value) pairs: a list of them, or anything sized that iterates them (history._Pairs)."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[tuple[Any, float]]: ...


Samples = Mapping[tuple[str, str], Pairs]  # (class, metric) -> [(host or (host, GPU), value)]
Findings = dict[Any, list[dict[str, Any]]]  # host or (host, GPU) -> [slow metric]


def judge(samples: Samples, rule: Mapping[str, float]) -> tuple[dict[str, Any], Findings, dict[str, list[str]]]:
    """samples: {(class, metric): [(key, value)]} -> (distributions {metric: {class: dist}}, slow {key: [finding]})."""
    distributions: dict[str, Any] = {}
    slow: Findings = {}
    too_small: dict[str, list[str]] = {}
    for (class_name, metric), pairs in sorted(samples.items()):
        lower_better = lower_is_better(metric)
        if len(pairs) < rule["min_peers"]:
            too_small.setdefault(class_name, []).append(metric)
            continue
        spread, dist = _distribution([v for _unused, v in pairs])
        entry = distributions.setdefault(metric, {"lower_is_better": lower_better, "classes": {}})
        entry["classes"][class_name] = dist
        for key, value in pairs:
            ratio, z = _score(value, spread, lower_better)
            if _is_slow(ratio, z, rule):
                slow.setdefault(key, []).append({"metric": metric, "value": value, "median": spread.median,
                                                 "ratio": ratio, "robust_z": z})
    return distributions, slow, too_small


def _worst_first(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(findings, key=lambda f: (f["ratio"] if f["ratio"] is not None else 0.0, f["metric"]))


class RunScore(NamedTuple):
    """One series' score in one run: its robust z and ratio against its class; value and class median are given with
    a series' latest score only (the finding shows them), None on the older ones."""

    run: int
    z: float
    ratio: float
    value: Optional[float] = None
    median: Optional[float] = None


Scores = Mapping[Any, Mapping[str, Sequence[RunScore]]]


def run_scores(samples: Samples, rule: Mapping[str, float]) -> Iterator[tuple[Any, str, float, float, float, float]]:
    """(key, metric, robust z, ratio, value, median) of every value of one run whose group has at least
    ``min_peers`` values and a spread (z and ratio both defined). z is on the larger of the MAD scale and the
    scale of the group's faster ``tail_quantile`` tail (stats.tail_scale): faults only slow a value, so that tail
    is noise alone, however many hosts of the group are slow."""
    for (_group, metric), pairs in samples.items():
        if len(pairs) < rule["min_peers"]:
            continue
        ordered = sorted(v for _unused, v in pairs)
        spread = Spread(ordered)
        lower_better = lower_is_better(metric)
        tail = tail_scale(ordered, spread.median, rule["tail_quantile"], upper=not lower_better)
        for key, value in pairs:
            ratio, z = _score(value, spread, lower_better, tail)
            if ratio is not None and z is not None:
                yield key, metric, z, ratio, value, spread.median


def _slow_on_history(last: Sequence[RunScore], rule: Mapping[str, float]) -> Optional[dict[str, Any]]:
    """The finding of one series' last N scores by the history rule (module docstring), or None."""
    runs = len(last)
    most_ratio = 1.0 - rule["history_shortfall"]
    slow_runs = sum(1 for score in last if score.z <= rule["history_run_z"] and score.ratio <= most_ratio)
    typical_ratio = median([score.ratio for score in last])
    majority = slow_runs >= runs // 2 + 1
    if not majority:
        cap = -rule["history_z_cap"]
        if (typical_ratio > most_ratio or any(score.z > rule["history_every_z"] for score in last)
                or sum(max(score.z, cap) for score in last) / runs > rule["history_mean_z"]):
            return None
    return {"ratio": typical_ratio, "robust_z": median([score.z for score in last]), "runs": runs, "slow_runs": slow_runs,
            "basis": "history"}


class JudgedSeries:
    """The (key, metric) series judge_history judged: ``(key, metric) in judged`` is answered from the scores when asked
    (merge_history asks for the few one-run findings); the fleet's series as a set of pairs cost ~2 KB a host."""

    __slots__ = ("scores", "current_run", "runs", "count")

    def __init__(self, scores: Scores, current_run: int, runs: int) -> None:
        self.scores, self.current_run, self.runs, self.count = scores, current_run, runs, 0

    def __contains__(self, pair: object) -> bool:
        if not self.count or not isinstance(pair, tuple) or len(pair) != 2 or pair[0] not in self.scores:
            return False
        series = self.scores[pair[0]].get(pair[1])
        return series is not None and _complete(list(series)[-self.runs:], self.current_run, self.runs)

    def __bool__(self) -> bool:
        return self.count > 0

    def __iter__(self) -> Iterator[tuple[Any, str]]:
        if self.count:
            for key, metric, _last in complete_series(self.scores, self.current_run, self.runs):
                yield key, metric


def judge_history(scores: Scores, current_run: int, rule: Mapping[str, float]) -> tuple[Findings, JudgedSeries]:
    """({key: [slow metric]}, the (key, metric) series judged) by the history rule (module docstring); scores: {key:
    {metric: [RunScore]}}, the last runs of each series, oldest first; only series
    scored in the current run and each of the runs before it are judged. A finding's ratio and robust_z are
    the medians over the runs; slow_runs counts the runs slow on their own."""
    runs = int(rule["history_runs"])
    slow: Findings = {}
    judged = JudgedSeries(scores, current_run, runs)
    if runs < 2:
        return slow, judged
    for key, metric, last in complete_series(scores, current_run, runs):
        judged.count += 1
        finding = _slow_on_history(last, rule)
        if finding is not None:
            finding.update(metric=metric, value=last[-1].value, median=last[-1].median)
            slow.setdefault(key, []).append(finding)
    return slow, judged


def _complete(last: Sequence[RunScore], current_run: int, runs: int) -> bool:
    return len(last) == runs and last[-1].run == current_run and last[0].run == current_run - runs + 1


def complete_series(scores: Scores, current_run: int, runs: int) -> Iterator[tuple[Any, str, list[RunScore]]]:
    """(key, metric, the last ``runs`` scores) of each series scored in the current run and each of the runs before."""
    for key, per_metric in scores.items():
        for metric, series in per_metric.items():
            last = list(series)[-runs:]
            if _complete(last, current_run, runs):
                yield key, metric, last


def merge_history(stragglers: dict[str, Any], slow: Findings, judged: Container[tuple[Any, str]], host_class: Mapping[str, Optional[str]],
                  gpu_info: Mapping[str, Mapping[str, Any]], rule: Optional[Mapping[str, float]] = None) -> None:
    """Judge analyse_stragglers()'s result on history: one-run findings of series the history judged and
    did not find slow are dropped unless below ``history_sudden_ratio``; the history's findings are added (a metric
    the one-run rule flagged keeps its one-run finding). slow, judged: judge_history() on keys
    ("host", name) or ("gpu", uuid); gpu_info: {uuid: this run's GPU record with its host}."""
    rule = dict(DEFAULT_RULE, **(rule or {}))

    def confirmed(key: tuple[str, str], finding: Mapping[str, Any]) -> bool:
        if (key, finding["metric"]) not in judged or (finding["ratio"] is not None and finding["ratio"] < rule["history_sudden_ratio"]):
            return True
        return any(f["metric"] == finding["metric"] for f in slow.get(key, ()))

    for kind, entries in (("host", stragglers["hosts"]), ("gpu", stragglers["gpus"])):
        kept = []
        for entry in entries:
            key = (kind, entry["host"] if kind == "host" else entry.get("uuid"))
            metrics = [f for f in entry["metrics"] if confirmed(key, f)]
            if metrics:
                entry["metrics"] = metrics
                entry.update(metrics[0])
                kept.append(entry)
        entries[:] = kept
    by_host = dict((s["host"], s) for s in stragglers["hosts"])
    by_gpu = dict((s["uuid"], s) for s in stragglers["gpus"] if s.get("uuid"))
    for key in sorted(slow):
        kind, owner = key
        if kind == "host":
            entry, host = by_host.get(owner), owner
        else:
            gpu = gpu_info.get(owner)
            if gpu is None:
                continue
            entry, host = by_gpu.get(owner), gpu["host"]
        if host_class.get(host) is None:
            continue
        known = set(f["metric"] for f in entry["metrics"]) if entry else set()
        new = [f for f in slow[key] if f["metric"] not in known]
        if not new:
            continue
        if entry is None:
            entry = {"host": host, "class": host_class[host], "metrics": []}
            if kind == "gpu":
                entry.update(uuid=owner, index=gpu_info[owner].get("index"), name=gpu_info[owner].get("name"))
                stragglers["gpus"].append(entry)
            else:
                stragglers["hosts"].append(entry)
        entry["metrics"] = _worst_first(entry["metrics"] + new)
        entry.update(entry["metrics"][0])
    stragglers["hosts"].sort(key=lambda s: s["host"])
    stragglers["gpus"].sort(key=lambda s: (s["host"], s.get("uuid") or ""))


def analyse_stragglers(profiles: Mapping[str, Any], host_class: Mapping[str, Optional[str]], rule: Optional[Mapping[str, float]] = None) -> dict[str, Any]:
    """Slow hosts and slow GPUs, class by class. profiles: {host: profile summary}; host_class: {host: class}."""
    rule = dict(DEFAULT_RULE, **(rule or {}))
    host_samples: dict[tuple[str, str], list[tuple[Any, float]]] = {}
    gpu_samples: dict[tuple[str, str], list[tuple[Any, float]]] = {}
    gpu_info: dict[tuple[str, str], dict[str, Any]] = {}
    for host in sorted(profiles):
        class_name = host_class.get(host)
        if class_name is None:
            continue
        summary = profiles[host]
        for metric, value in host_figures(summary).items():
            host_samples.setdefault((class_name, metric), []).append((host, value))
        for gpu in gpu_records(summary):
            key = (host, gpu.get("uuid") or "index:%s" % gpu.get("index"))
            gpu_info[key] = gpu
            for metric, value in gpu_figures(gpu).items():
                gpu_samples.setdefault((class_name, metric), []).append((key, value))

    host_dist, slow_hosts, small_hosts = judge(host_samples, rule)
    gpu_dist, slow_gpus, small_gpus = judge(gpu_samples, rule)
    hosts = []
    for host in sorted(slow_hosts):
        findings = _worst_first(slow_hosts[host])
        hosts.append(dict(findings[0], host=host, **{"class": host_class[host], "metrics": findings}))
    gpus = []
    for key in sorted(slow_gpus):
        findings = _worst_first(slow_gpus[key])
        gpu = gpu_info[key]
        gpus.append(dict(findings[0], host=key[0], uuid=gpu.get("uuid"), index=gpu.get("index"), name=gpu.get("name"),
                         metrics=findings, **{"class": host_class[key[0]]}))
    return {
        "rule": rule,
        "host_metrics": host_dist,
        "gpu_metrics": gpu_dist,
        "hosts": hosts,
        "gpus": gpus,
        "too_few_peers": {"hosts": small_hosts, "gpus": small_gpus},
    }

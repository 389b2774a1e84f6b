# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Fleet history: trends per host and per GPU UUID across the last N runs, and repeat offenders.

Each run leaves a compact snapshot (per host: status, figures, failing checks; per GPU UUID: figures,
failing checks and straggler metrics) in the history directory; the last N are kept. Analysis folds
the snapshots oldest first, one at a time, so memory does not grow with N:

- EWMA (alpha 0.3, seeded with the oldest value) of every metric of every host and GPU;
- trend = least-squares slope x (runs - 1) / mean, the relative change across the window, negative when
  the metric got worse (sign flipped for lower-is-better metrics); "degrading" when trend <= -5 % over at
  least 3 runs;
- repeat offenders: a GPU (by UUID, wherever it sits) or a host with a failing check (FAIL/ERROR) or a
  straggler flag in at least 2 of the retained runs, the current one included.

The snapshot and fold functions are pure; read_snapshots / write_snapshot do the file I/O.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import json
import os
import re
from array import array
from collections.abc import Iterator, Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._atomic import write_atomic
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.figures import gpu_figures, gpu_records, host_figures, lower_is_better

SNAPSHOT_KIND = "continuum.hydra.fleet_history"
SNAPSHOT_SCHEMA_VERSION = "1.0.0"
SNAPSHOT_PATTERN = re.compile(r"^fleet-history-\d{8}T\d{6}\.\d{6}Z\.json$")
DEFAULT_RULE: dict[str, float] = {"ewma_alpha": 0.3, "trend_threshold": -0.05, "trend_min_runs": 3, "repeat_min_runs": 2}
FAILING = (FAIL, ERROR)


def _gpu_key(gpu: Mapping[str, Any]) -> Optional[str]:
    return gpu.get("uuid") or None


def snapshot(report: Mapping[str, Any]) -> dict[str, Any]:
    """The compact record of this run that later runs read (after analysis: it carries the straggler flags)."""
    analysis = report.get("analysis") or {}
    stragglers = analysis.get("stragglers") or {}
    slow_hosts = dict((s["host"], ["straggler:" + m["metric"] for m in s["metrics"]]) for s in stragglers.get("hosts") or [])
    slow_gpus: dict[str, dict[str, list[str]]] = {}
    for slow in stragglers.get("gpus") or []:
        if slow.get("uuid"):
            slow_gpus.setdefault(slow["host"], {})[slow["uuid"]] = ["straggler:" + m["metric"] for m in slow["metrics"]]
    hosts = {}
    for name, entry in report["hosts"].items():
        gpus: dict[str, dict[str, Any]] = {}
        for gpu in gpu_records(entry.get("profile")):
            uuid = _gpu_key(gpu)
            if uuid:
                gpus[uuid] = {"index": gpu.get("index"), "figures": gpu_figures(gpu), "failing": []}
        host_failing = list(slow_hosts.get(name, []))
        for chk in (entry.get("doctor") or {}).get("checks") or []:
            if chk.get("status") not in FAILING:
                continue
            named = [g for g in (chk.get("details") or {}).get("gpus") or [] if isinstance(g, dict) and g.get("uuid")]
            if not named:
                host_failing.append(chk["id"])
            for gpu in named:
                record = gpus.setdefault(gpu["uuid"], {"index": gpu.get("index"), "figures": {}, "failing": []})
                record["failing"].append(chk["id"])
        for uuid, flags in slow_gpus.get(name, {}).items():
            gpus.setdefault(uuid, {"index": None, "figures": {}, "failing": []})["failing"].extend(flags)
        hosts[name] = {"status": entry["status"], "figures": host_figures(entry.get("profile")),
                       "failing": host_failing, "gpus": gpus}
    return {"schema_version": SNAPSHOT_SCHEMA_VERSION, "kind": SNAPSHOT_KIND, "generated_at": report["generated_at"],
            "hosts": hosts}


class HistoryFold:
    """Accumulates snapshots oldest first (keeping none of them); result() judges the hosts and GPUs of the last.

    A series (one metric of one host or GPU) is kept as running sums - count, EWMA, sum of values, sum of
    index x value - so memory per series is constant however many runs are folded.
    """

    def __init__(self, alpha: float = DEFAULT_RULE["ewma_alpha"]) -> None:
        self.alpha = alpha
        self.runs = 0
        self.owners: dict[tuple[str, str], list[Any]] = {}     # ("host", name) or ("gpu", uuid) -> [runs seen, {metric: array(n, ewma, sum_y, sum_xy)}]
        self.offences: dict[tuple[str, str], dict[str, Any]] = {}   # ("host", name) or ("gpu", uuid) -> {"runs", "offences", "first", "last"}
        self.where: dict[str, tuple[str, Any]] = {}      # gpu uuid -> (host, index) of its latest sighting

    def add(self, snap: Mapping[str, Any]) -> None:
        self.runs += 1
        when = snap.get("generated_at")
        for host, record in (snap.get("hosts") or {}).items():
            self._measure(("host", host), record.get("figures"))
            self._offend(("host", host), record.get("failing"), when)
            for uuid, gpu in (record.get("gpus") or {}).items():
                self.where[uuid] = (host, gpu.get("index"))
                self._measure(("gpu", uuid), gpu.get("figures"))
                self._offend(("gpu", uuid), gpu.get("failing"), when)

    def _measure(self, key: tuple[str, str], figures: Optional[Mapping[str, float]]) -> None:
        owner = self.owners.get(key)
        if owner is None:
            owner = self.owners[key] = [0, {}]
        owner[0] += 1
        for metric, value in (figures or {}).items():
            state = owner[1].get(metric)
            if state is None:
                owner[1][metric] = array("d", (1.0, value, value, 0.0))
            else:
                state[3] += state[0] * value  # x is this value's position in the series: 0, 1, 2...
                state[0] += 1.0
                state[1] = self.alpha * value + (1.0 - self.alpha) * state[1]
                state[2] += value

    def _offend(self, key: tuple[str, str], failing: Optional[list[str]], when: Optional[str]) -> None:
        if not failing:
            return
        record = self.offences.get(key)
        if record is None:
            record = self.offences[key] = {"runs": 0, "offences": set(), "first": when, "last": when}
        record["runs"] += 1
        record["offences"].update(failing)
        record["last"] = when

    def result(self, current: Mapping[str, Any], rule: Optional[Mapping[str, float]] = None) -> dict[str, Any]:
        """Judge the hosts and GPUs of ``current``, the last snapshot added (this run's). Consumes the fold: each
        series is dropped as it is judged, so its state and its result are never both held for the whole fleet."""
        rule = dict(DEFAULT_RULE, **(rule or {}))
        latest = current.get("hosts") or {}
        hosts: dict[str, Any] = {}
        gpus: dict[str, Any] = {}
        degrading: list[dict[str, Any]] = []
        for key in sorted(self.owners):
            kind, owner = key
            runs, series = self.owners.pop(key)
            if kind == "host":
                measured = (latest.get(owner) or {}).get("figures") or {}
            else:
                host, index = self.where[owner]
                measured = (((latest.get(host) or {}).get("gpus") or {}).get(owner) or {}).get("figures") or {}
            if not measured:
                continue  # not measured in this run: its history is kept but not judged
            ewmas: dict[str, float] = {}
            trends: dict[str, float] = {}
            for metric in sorted(series):
                if metric not in measured:
                    continue
                count, smoothed, sum_y, sum_xy = series[metric]
                trend = _relative_trend(count, sum_y, sum_xy)
                if lower_is_better(metric):
                    trend = -trend
                ewmas[metric], trends[metric] = smoothed, trend
                if count >= rule["trend_min_runs"] and trend <= rule["trend_threshold"]:
                    where = (owner, None) if kind == "host" else self.where[owner]
                    degrading.append({"host": where[0], "uuid": owner if kind == "gpu" else None, "index": where[1],
                                      "metric": metric, "ewma": smoothed, "trend": trend, "runs": int(count)})
            entry = {"runs": runs, "ewma": ewmas, "trend": trends}
            if kind == "host":
                hosts[owner] = entry
            else:
                entry.update(host=self.where[owner][0], index=self.where[owner][1])
                gpus[owner] = entry
        offenders: list[dict[str, Any]] = []
        for (kind, owner), record in self.offences.items():
            if record["runs"] < rule["repeat_min_runs"]:
                continue
            host, index = (owner, None) if kind == "host" else self.where[owner]
            now = latest.get(host) or {}
            failing_now = bool(now.get("failing")) if kind == "host" else bool(((now.get("gpus") or {}).get(owner) or {}).get("failing"))
            offenders.append({"kind": kind, "host": host, "uuid": owner if kind == "gpu" else None, "index": index,
                              "runs_failed": record["runs"], "runs": self.runs, "offences": sorted(record["offences"]),
                              "first": record["first"], "last": record["last"], "failing_now": failing_now})
        offenders.sort(key=lambda o: (-o["runs_failed"], o["host"], o["kind"], o["uuid"] or ""))
        degrading.sort(key=lambda d: (d["trend"], d["host"], d["uuid"] or "", d["metric"]))
        return {"runs": self.runs, "rule": rule, "hosts": hosts, "gpus": gpus, "degrading": degrading,
                "repeat_offenders": offenders}


def _relative_trend(count: float, sum_y: float, sum_xy: float) -> float:
    """Least-squares slope x (n - 1) over the mean, from running sums (x = 0, 1, ... n - 1)."""
    n = count
    if n < 2 or sum_y == 0:
        return 0.0
    sum_x = n * (n - 1) / 2.0
    sum_xx = (n - 1) * n * (2 * n - 1) / 6.0
    slope = (n * sum_xy - sum_x * sum_y) / (n * sum_xx - sum_x * sum_x)
    return slope * (n - 1) / abs(sum_y / n)


# File I/O: the snapshots on disk.

def snapshot_name(now: datetime.datetime) -> str:
    return "fleet-history-%s.json" % now.strftime("%Y%m%dT%H%M%S.%fZ")


def snapshot_files(directory: str) -> list[str]:
    """Snapshot file names in the directory, oldest first (the names sort by time)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(n for n in names if SNAPSHOT_PATTERN.match(n))


def read_snapshots(directory: str, limit: int, problems: list[str]) -> Iterator[dict[str, Any]]:
    """The newest ``limit`` readable snapshots, oldest first; an unreadable one is a line in problems, not an error."""
    for name in snapshot_files(directory)[-limit:] if limit > 0 else []:
        snap = None  # the one yielded before is not held while this one is parsed
        path = os.path.join(directory, name)
        try:
            with open(path) as handle:
                snap = json.load(handle)
        except (OSError, ValueError) as exc:
            problems.append("history: skipped %s: %s" % (path, " ".join(str(exc).split())))
            continue
        if not isinstance(snap, dict) or snap.get("kind") != SNAPSHOT_KIND or not isinstance(snap.get("hosts"), dict):
            problems.append("history: skipped %s: not a %s snapshot" % (path, SNAPSHOT_KIND))
            continue
        yield snap


def write_snapshot(directory: str, snap: Mapping[str, Any], now: datetime.datetime, keep: int) -> str:
    """Write this run's snapshot atomically, then delete the oldest beyond ``keep``. Returns the path."""
    path = os.path.join(directory, snapshot_name(now))
    write_atomic(path, json.dumps(snap, sort_keys=True, separators=(",", ":")) + "\n")
    for name in snapshot_files(directory)[:-keep]:
        os.unlink(os.path.join(directory, name))
    return path

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
  straggler flag in at least 2 of the retained runs, the current one included: "failed in 2 of 3 runs"
  counts each run at most once, out of the runs the host or GPU was seen in;
- stragglers judged on history: each run's figures are scored against the host's class in that run
  (robust z and ratio, stragglers.run_scores); the last ``window`` scores of every host and GPU are kept
  and stragglers.judge_history() flags the ones well below their class in most of those runs, or a little
  in every one.

The snapshot and fold functions are pure; read_snapshots / write_snapshot do the file I/O. A snapshot that
cannot be read or is not the expected shape is skipped with a problem line naming it and renamed aside
(``<name>.bad``), so it neither stops the analysis nor is read again; one that is not a regular file (a FIFO) is
set aside without being opened, and a read past its deadline is skipped and left in place. The callback holds
``state_files.locked(lock_target(directory))`` from the first read to the last write of a run, so two runs sharing
the directory take turns.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import json
import math
import os
import re
from array import array
from collections.abc import ItemsView, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._atomic import write_atomic
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import interconnect, state_files
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.figures import gpu_figures, gpu_records, host_figures, lower_is_better
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.stragglers import DEFAULT_RULE as STRAGGLER_RULE
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.stragglers import JudgedSeries, RunScore, judge_history, run_scores

SNAPSHOT_KIND = "continuum.hydra.fleet_history"
SNAPSHOT_SCHEMA_VERSION = "1.0.0"
SNAPSHOT_PATTERN = re.compile(r"^fleet-history-\d{8}T\d{6}\.\d{6}Z\.json$")
LOCK_NAME = "fleet-history"  # state_files.locked() of this name: fleet-history.lock
DEFAULT_RULE: dict[str, float] = {"ewma_alpha": 0.3, "trend_threshold": -0.05, "trend_min_runs": 3, "repeat_min_runs": 2}
FAILING = (FAIL, ERROR)


def _gpu_key(gpu: Mapping[str, Any]) -> Optional[str]:
    return gpu.get("uuid") or None


def snapshot(report: Mapping[str, Any], readings: Optional[Mapping[str, str]] = None, stragglers: bool = True) -> dict[str, Any]:
    """The compact record of this run that later runs read (after analysis: it carries the straggler flags).

    ``readings``: each host's interconnect reading as interconnect.stored() wrote it, when the analysis already made
    them (analyse_interconnect's ``stored_readings``); else each host's is read from its entry. ``stragglers``: False
    leaves the straggler flags out, for flag_stragglers() to add once the stragglers are final."""
    hosts = {}
    for name, entry in report["hosts"].items():
        gpus: dict[str, dict[str, Any]] = {}
        for gpu in gpu_records(entry.get("profile")):
            uuid = _gpu_key(gpu)
            if uuid:
                gpus[uuid] = {"index": gpu.get("index"), "figures": gpu_figures(gpu), "failing": []}
        host_failing = []
        for chk in (entry.get("doctor") or {}).get("checks") or []:
            if chk.get("status") not in FAILING:
                continue
            named = [g for g in (chk.get("details") or {}).get("gpus") or [] if isinstance(g, dict) and g.get("uuid")]
            if not named:
                host_failing.append(chk["id"])
            for gpu in named:
                record = gpus.setdefault(gpu["uuid"], {"index": gpu.get("index"), "figures": {}, "failing": []})
                record["failing"].append(chk["id"])
        hosts[name] = {"status": entry["status"], "class": entry.get("class"), "figures": host_figures(entry.get("profile")),
                       "failing": host_failing, "gpus": gpus}
        if readings is not None:
            if name in readings:  # the interconnect counters the next run's rates start from (_fleet/interconnect.py)
                hosts[name]["interconnect"] = readings[name]
        else:
            counters = interconnect.reading(entry)
            if counters is not None:
                hosts[name]["interconnect"] = interconnect.stored(counters)
    snap = {"schema_version": SNAPSHOT_SCHEMA_VERSION, "kind": SNAPSHOT_KIND, "generated_at": report["generated_at"],
            "hosts": hosts}
    if stragglers:
        flag_stragglers(snap, report)
    return snap


def flag_stragglers(snap: dict[str, Any], report: Mapping[str, Any]) -> None:
    """The report's stragglers as failing flags of the snapshot ("straggler:<metric>"): a host's before its failing
    checks, a GPU's after them (a slow GPU the snapshot does not list gets a record of its own)."""
    stragglers = (report.get("analysis") or {}).get("stragglers") or {}
    for slow in stragglers.get("hosts") or []:
        record = snap["hosts"].get(slow["host"])
        if record is not None:
            record["failing"][:0] = ["straggler:" + m["metric"] for m in slow["metrics"]]
    for slow in stragglers.get("gpus") or []:
        record = snap["hosts"].get(slow["host"])
        if slow.get("uuid") and record is not None:
            gpu = record["gpus"].setdefault(slow["uuid"], {"index": None, "figures": {}, "failing": []})
            gpu["failing"].extend("straggler:" + m["metric"] for m in slow["metrics"])


SUMS = 4  # count, EWMA, sum_y, sum_xy
NOT_SCORED = float("nan")


@dataclass(slots=True)
class OwnerState:
    """One owner's (a host's or a GPU's) state in the fold. ``numbers`` starts with one run number per straggler-score
    slot (the run whose scores the slot holds; -1 none), then one block per metric, in ``names``' order: the running
    sums (count, EWMA, sum of values, sum of index x value), (robust z, ratio) per slot (NaN: not scored in that slot's
    run), the value and class median of its latest score. A fleet's owners hold a few hundred bytes each this way (a
    dict of one small array per metric and a deque of score tuples per metric held ten times that); slots, no dict."""

    runs: int  # runs seen
    last_run: int  # the last run seen
    names: tuple[str, ...]  # its metric names: one tuple shared by the owners with the same names
    numbers: array  # array("d"), the layout above
    host: str = ""  # a GPU's host and index at its latest sighting (a host's stay unset)
    index: Any = None


class _Pairs:
    """One group's (key, value) pairs of a run as stragglers.run_scores reads them, held as a list of keys (one key
    object per owner, shared by its metrics) and an array of values: a fleet's pairs held as tuples cost ~2 KB a host."""

    __slots__ = ("keys", "values")

    def __init__(self) -> None:
        self.keys: list[tuple[str, str]] = []
        self.values = array("d")

    def add(self, key: tuple[str, str], value: float) -> None:
        self.keys.append(key)
        self.values.append(value)

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator[tuple[tuple[str, str], float]]:
        return zip(self.keys, self.values)


class HistoryFold:
    """Accumulates snapshots oldest first (keeping none of them); result() judges the hosts and GPUs of the last.

    A series (one metric of one host or GPU) is kept as running sums - count, EWMA, sum of values, sum of
    index x value - so memory per series is constant however many runs are folded; its robust z and ratio against
    its class are kept for the last ``window`` runs only (straggler scores, stragglers.judge_history), in the
    owner's one array (the layout above).
    """

    def __init__(self, alpha: float = DEFAULT_RULE["ewma_alpha"], straggler_rule: Optional[Mapping[str, float]] = None,
                 host_class: Optional[Mapping[str, Optional[str]]] = None) -> None:
        self.alpha = alpha
        self.runs = 0
        self.owners: dict[tuple[str, str], OwnerState] = {}  # ("host", name) or ("gpu", uuid) -> its state
        self.offences: dict[tuple[str, str], dict[str, Any]] = {}   # ("host", name) or ("gpu", uuid) -> {"runs", "offences", "first", "last", "run"}
        self.straggler_rule = dict(STRAGGLER_RULE, **(straggler_rule or {}))
        self.window = max(0, int(self.straggler_rule["history_runs"]))
        self.host_class = host_class or {}   # this run's classes, for snapshots written before they carried one
        self.interconnect: dict[str, str] = {}  # host -> its latest interconnect reading, as stored (one per host)
        self._slots = self.window if self.window >= 2 else 0  # straggler scores are kept for 2 runs or more
        self._block = SUMS + 2 * self._slots + 2
        self._names: dict[tuple[str, ...], dict[str, int]] = {(): {}}  # each tuple of names -> metric -> its block's offset
        self._tuples: dict[tuple[str, ...], tuple[str, ...]] = {(): ()}  # the one tuple object of each names, shared

    def _owner(self, key: tuple[str, str]) -> OwnerState:
        owner = self.owners.get(key)
        if owner is None:
            owner = self.owners[key] = OwnerState(0, 0, (), array("d", [-1.0] * self._slots))
        return owner

    def _offset(self, owner: OwnerState, metric: str) -> int:
        """Where the metric's block starts in the owner's numbers; a new metric gets a block of zeros (count 0)."""
        offset = self._names[owner.names].get(metric)
        if offset is None:
            names = owner.names + (metric,)
            names = self._tuples.setdefault(names, names)
            if names not in self._names:
                self._names[names] = dict((name, self._slots + n * self._block) for n, name in enumerate(names))
            owner.names = names
            owner.numbers.extend([0.0] * SUMS + [NOT_SCORED] * (2 * self._slots) + [0.0, 0.0])
            offset = self._names[names][metric]
        return offset

    def add(self, snap: Mapping[str, Any], score: bool = True) -> None:
        """Fold one snapshot; ``score``: False when score() was already called with it (this run's)."""
        self.runs += 1
        when = snap.get("generated_at")
        for host, record in (snap.get("hosts") or {}).items():
            if isinstance(record.get("interconnect"), str):
                self.interconnect[host] = record["interconnect"]
            self._measure(("host", host), record.get("figures"))
            self._offend(("host", host), record.get("failing"), when)
            for uuid, gpu in (record.get("gpus") or {}).items():
                owner = self._owner(("gpu", uuid))
                owner.host, owner.index = host, gpu.get("index")
                self._measure(("gpu", uuid), gpu.get("figures"))
                self._offend(("gpu", uuid), gpu.get("failing"), when)
        if score:
            self.score(snap, self.runs)

    def score(self, snap: Mapping[str, Any], run: int) -> None:
        """Run ``run``'s robust z and ratio of every host and GPU figure against its class in that run."""
        if self.window < 2:
            return
        samples: dict[tuple[str, str], _Pairs] = {}

        def add(group: str, key: tuple[str, str], figures: Optional[Mapping[str, float]]) -> None:
            for metric, value in (figures or {}).items():
                pairs = samples.get((group, metric))
                if pairs is None:  # not setdefault: a _Pairs per figure only to be dropped
                    pairs = samples[(group, metric)] = _Pairs()
                pairs.add(key, value)

        for host, record in (snap.get("hosts") or {}).items():
            class_name = record.get("class") or self.host_class.get(host)
            if class_name is None:
                continue
            add("host\0" + class_name, ("host", host), record.get("figures"))
            gpu_group = "gpu\0" + class_name
            for uuid, gpu in (record.get("gpus") or {}).items():
                add(gpu_group, ("gpu", uuid), gpu.get("figures"))
        slot = run % self._slots
        for key, metric, z, ratio, value, centre in run_scores(samples, self.straggler_rule):
            owner = self._owner(key)
            offset = self._offset(owner, metric)
            numbers = owner.numbers
            if numbers[slot] != run:  # the owner's first score of this run: its slot's older scores go
                numbers[slot] = run
                for start in self._names[owner.names].values():
                    numbers[start + SUMS + 2 * slot] = numbers[start + SUMS + 2 * slot + 1] = NOT_SCORED
            at = offset + SUMS + 2 * slot
            numbers[at], numbers[at + 1] = z, ratio
            numbers[offset + SUMS + 2 * self._slots], numbers[offset + SUMS + 2 * self._slots + 1] = value, centre

    def history_stragglers(self, run: int) -> tuple[dict[Any, list[dict[str, Any]]], JudgedSeries]:
        """({("host", name) or ("gpu", uuid): [slow metric]}, {(key, metric) judged}) on the last ``window``
        runs up to ``run`` (this one, scored); stragglers.judge_history() is the rule."""
        return judge_history(_Scores(self, run), run, self.straggler_rule)

    def scores(self, key: tuple[str, str], run: int) -> dict[str, list[RunScore]]:
        """{metric: [RunScore]} of one owner: its scores in the last ``window`` runs up to ``run``, oldest first (what
        stragglers.judge_history reads)."""
        owner = self.owners.get(key)
        if owner is None or not self._slots:
            return {}
        numbers = owner.numbers
        out: dict[str, list[RunScore]] = {}
        for metric, offset in self._names[owner.names].items():
            series = []
            for past in range(max(1, run - self._slots + 1), run + 1):
                slot = past % self._slots
                at = offset + SUMS + 2 * slot
                if numbers[slot] == past and not math.isnan(numbers[at]):
                    series.append(RunScore(past, numbers[at], numbers[at + 1]))
            if series:
                last = offset + SUMS + 2 * self._slots
                series[-1] = series[-1]._replace(value=numbers[last], median=numbers[last + 1])
                out[metric] = series
        return out

    def _measure(self, key: tuple[str, str], figures: Optional[Mapping[str, float]]) -> None:
        owner = self._owner(key)
        if owner.last_run == self.runs:
            return  # seen twice in one run (a GPU UUID reported by two hosts): one run, one value
        owner.last_run = self.runs
        owner.runs += 1
        for metric, value in (figures or {}).items():
            at = self._offset(owner, metric)
            state = owner.numbers
            if state[at] == 0.0:
                state[at], state[at + 1], state[at + 2], state[at + 3] = 1.0, value, value, 0.0
            else:
                state[at + 3] += state[at] * value  # x is this value's position in the series: 0, 1, 2...
                state[at] += 1.0
                state[at + 1] = self.alpha * value + (1.0 - self.alpha) * state[at + 1]
                state[at + 2] += value

    def _offend(self, key: tuple[str, str], failing: Optional[list[str]], when: Optional[str]) -> None:
        if not failing:
            return
        record = self.offences.get(key)
        if record is None:
            record = self.offences[key] = {"runs": 0, "offences": set(), "first": when, "last": when, "run": 0}
        if record["run"] != self.runs:  # a run counts once, however many offences it has
            record["runs"] += 1
            record["run"] = self.runs
        record["offences"].update(failing)
        record["last"] = when

    def result(self, current: Mapping[str, Any], rule: Optional[Mapping[str, float]] = None) -> dict[str, Any]:
        """Judge the hosts and GPUs of ``current``, the last snapshot added (this run's). Consumes the fold: each
        series is dropped as it is judged, so its state and its result are never both held for the whole fleet."""
        rule = dict(DEFAULT_RULE, **(rule or {}))
        latest = current.get("hosts") or {}
        host_runs = dict((owner, state.runs) for (kind, owner), state in self.owners.items() if kind == "host")
        hosts, gpus = SmoothedSeries(), SmoothedSeries()
        degrading: list[dict[str, Any]] = []
        offenders: list[dict[str, Any]] = []
        for (kind, owner), record in self.offences.items():
            if record["runs"] < rule["repeat_min_runs"]:
                continue
            state = self.owners[(kind, owner)]
            host, index = (owner, None) if kind == "host" else (state.host, state.index)
            now = latest.get(host) or {}
            failing_now = bool(now.get("failing")) if kind == "host" else bool(((now.get("gpus") or {}).get(owner) or {}).get("failing"))
            offenders.append({"kind": kind, "host": host, "uuid": owner if kind == "gpu" else None, "index": index,
                              "runs_failed": record["runs"], "runs": max(record["runs"], host_runs.get(host, self.runs)),
                              "offences": sorted(record["offences"]),
                              "first": record["first"], "last": record["last"], "failing_now": failing_now})
        offenders.sort(key=lambda o: (-o["runs_failed"], o["host"], o["kind"], o["uuid"] or ""))
        self.offences = {}
        for key in sorted(self.owners):
            kind, owner = key
            state = self.owners.pop(key)
            names, numbers = state.names, state.numbers
            if kind == "host":
                measured = (latest.get(owner) or {}).get("figures") or {}
            else:
                host, index = state.host, state.index
                measured = (((latest.get(host) or {}).get("gpus") or {}).get(owner) or {}).get("figures") or {}
            if not measured:
                continue  # not measured in this run: its history is kept but not judged
            judged: list[str] = []
            values = array("d")  # (EWMA, trend) of each judged metric
            offsets = self._names[names]
            for metric in sorted(offsets):
                at = offsets[metric]
                if metric not in measured or not numbers[at]:
                    continue  # not measured now, or only scored (never folded): no series to judge
                count, smoothed, sum_y, sum_xy = numbers[at], numbers[at + 1], numbers[at + 2], numbers[at + 3]
                trend = _relative_trend(count, sum_y, sum_xy)
                if lower_is_better(metric):
                    trend = -trend
                judged.append(metric)
                values.extend((smoothed, trend))
                if count >= rule["trend_min_runs"] and trend <= rule["trend_threshold"]:
                    degrading.append({"host": owner if kind == "host" else host, "uuid": owner if kind == "gpu" else None,
                                      "index": None if kind == "host" else index,
                                      "metric": metric, "ewma": smoothed, "trend": trend, "runs": int(count)})
            shared = tuple(judged)
            shared = self._tuples.setdefault(shared, shared)
            if kind == "host":
                hosts.add(owner, (state.runs, shared), values)
            else:
                gpus.add(owner, (state.runs, shared, host, index), values)
        degrading.sort(key=lambda d: (d["trend"], d["host"], d["uuid"] or "", d["metric"]))
        return {"runs": self.runs, "rule": rule, "hosts": hosts, "gpus": gpus, "degrading": degrading,
                "repeat_offenders": offenders}


class SmoothedSeries(Mapping[str, dict[str, Any]]):
    """The history's ``hosts`` or ``gpus`` as the report shows them ({name or UUID: {"runs", "ewma": {metric: value},
    "trend": {metric: value}}, a GPU's with its "host" and "index"}), each entry made when it is read (the JSON
    report's writer reads each once): a fleet's held as dicts cost ~4 KB a host, as one tuple per owner and one array
    of numbers ~1 KB (benchmarks/fleet_analysis.py)."""

    __slots__ = ("_rows", "_values")

    def __init__(self) -> None:
        self._rows: dict[str, tuple[Any, ...]] = {}  # owner -> (runs, metric names[, host, index], where its values start)
        self._values = array("d")  # (EWMA, trend) of each metric of each owner, in its names' order

    def add(self, owner: str, row: tuple[Any, ...], values: array) -> None:
        self._rows[owner] = row + (len(self._values),)
        self._values.extend(values)

    def __getitem__(self, owner: str) -> dict[str, Any]:
        runs, names, *where, start = self._rows[owner]
        values = self._values[start:start + 2 * len(names)]
        entry = {"runs": runs, "ewma": dict(zip(names, values[0::2])), "trend": dict(zip(names, values[1::2]))}
        if where:
            entry["host"], entry["index"] = where
        return entry

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


class _Scores(Mapping[tuple[str, str], Mapping[str, list[RunScore]]]):
    """The fold's straggler scores as stragglers.judge_history reads them ({owner: {metric: [RunScore]}}), made one
    owner at a time as it is read: never the whole fleet's at once."""

    def __init__(self, fold: HistoryFold, run: int) -> None:
        self._fold = fold
        self._run = run

    def __getitem__(self, key: tuple[str, str]) -> Mapping[str, list[RunScore]]:
        if key not in self._fold.owners:
            raise KeyError(key)
        return self._fold.scores(key, self._run)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._fold.owners)

    def __len__(self) -> int:
        return len(self._fold.owners)


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

def lock_target(directory: str) -> str:
    """What the history's lock is taken on (state_files.locked): the lock file is <directory>/fleet-history.lock."""
    return os.path.join(directory, LOCK_NAME)


def snapshot_name(now: datetime.datetime) -> str:
    return "fleet-history-%s.json" % now.strftime("%Y%m%dT%H%M%S.%fZ")


def snapshot_files(directory: str) -> list[str]:
    """Snapshot file names in the directory, oldest first (the names sort by time); none when it cannot be listed
    within state_files.READ_TIMEOUT_S (read_snapshots says why)."""
    try:
        return _snapshot_names(state_files.list_dir(directory))
    except OSError:
        return []


def _snapshot_names(names: list[str]) -> list[str]:
    return sorted(n for n in names if SNAPSHOT_PATTERN.match(n))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _figures_ok(figures: Any) -> bool:
    return figures is None or (isinstance(figures, dict) and all(isinstance(k, str) and _is_number(v) for k, v in figures.items()))


def _failing_ok(failing: Any) -> bool:
    return failing is None or (isinstance(failing, list) and all(isinstance(f, str) for f in failing))


def snapshot_problem(snap: Any) -> Optional[str]:
    """Why a parsed snapshot cannot be folded (None when it can): everything HistoryFold reads is checked."""
    if not isinstance(snap, dict) or snap.get("kind") != SNAPSHOT_KIND or not isinstance(snap.get("hosts"), (dict, _Hosts)):
        return "not a %s snapshot" % SNAPSHOT_KIND
    if not isinstance(snap.get("generated_at"), (str, type(None))):
        return "generated_at is not a string"
    for host, record in snap["hosts"].items():
        if not isinstance(record, dict):
            return "host %r is not an object" % host
        if not (_figures_ok(record.get("figures")) and _failing_ok(record.get("failing"))):
            return "host %r: figures or failing checks of the wrong type" % host
        if not isinstance(record.get("class"), (str, type(None))) or not isinstance(record.get("gpus"), (dict, type(None))):
            return "host %r: class or gpus of the wrong type" % host
        if not isinstance(record.get("interconnect"), (str, type(None))):
            return "host %r: interconnect reading of the wrong type" % host  # its content is checked when it is used
        for uuid, gpu in (record.get("gpus") or {}).items():
            if not isinstance(gpu, dict) or not _figures_ok(gpu.get("figures")) or not _failing_ok(gpu.get("failing")):
                return "GPU %r of host %r: not a GPU record" % (uuid, host)
            index = gpu.get("index")
            if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
                return "GPU %r of host %r: index is not a number" % (uuid, host)
    return None


def _set_aside(path: str) -> str:
    """Rename a bad snapshot out of the history (its new name no longer matches); returns what was done."""
    aside = path + ".bad"
    try:
        os.replace(path, aside)
    except OSError as exc:
        return "could not move it aside: %s" % (exc.strerror or exc)
    return "kept aside as %s" % os.path.basename(aside)


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def _skip(text: str, idx: int) -> int:
    """The index of the first character at or after ``idx`` that is not JSON whitespace."""
    match = _SPACE.match(text, idx)
    return match.end() if match else idx


_COMPACT = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def _members(text: str, start: int, each: Any) -> int:
    """Walk the JSON object at text[start]: each(key, index of its value) parses the value and returns the index after
    it. Returns the index after the object; ValueError where the text is not such an object."""
    idx = _skip(text, start)
    if not text.startswith("{", idx):
        raise ValueError("not an object at char %d" % idx)
    idx = _skip(text, idx + 1)
    if text.startswith("}", idx):
        return idx + 1
    while True:
        key, idx = _DECODER.raw_decode(text, idx)
        idx = _skip(text, idx)
        if not isinstance(key, str) or not text.startswith(":", idx):
            raise ValueError("not an object member at char %d" % idx)
        idx = _skip(text, each(key, _skip(text, idx + 1)))
        if text.startswith("}", idx):
            return idx + 1
        if not text.startswith(",", idx):
            raise ValueError("no ',' at char %d" % idx)
        idx = _skip(text, idx + 1)


class _Hosts(Mapping[str, Any]):
    """A snapshot file's ``hosts``, each host's record parsed as it is read and not kept: a fleet's parsed records
    cost several times their text (7 KB a host), held all at once only by the fold's readers one host at a time."""

    def __init__(self, text: str, start: int, names: list[str]) -> None:
        self._text, self._start, self._names = text, start, names

    def _walk(self) -> Iterator[tuple[str, Any]]:
        """(name, record) of each host, parsed as it comes (parse_snapshot checked the text's shape already)."""
        text = self._text
        idx = _skip(text, self._start + 1)
        if text.startswith("}", idx):
            return
        while True:
            key, idx = _DECODER.raw_decode(text, idx)
            idx = _skip(text, idx)  # at the ':'
            value, idx = _DECODER.raw_decode(text, _skip(text, idx + 1))
            yield key, value
            idx = _skip(text, idx)  # at the ',' or the closing '}'
            if text.startswith("}", idx):
                return
            idx = _skip(text, idx + 1)

    def __getitem__(self, name: str) -> Any:
        for key, value in self._walk():
            if key == name:
                return value
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def items(self) -> "_HostItems":
        return _HostItems(self)


class _HostItems(ItemsView[str, Any]):
    """The hosts' (name, record) pairs, walked through the text once per iteration (not a name lookup per host)."""

    def __init__(self, hosts: _Hosts) -> None:
        super().__init__(hosts)
        self._hosts = hosts

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return self._hosts._walk()  # pylint: disable=protected-access


def parse_snapshot(text: str) -> Any:
    """A snapshot file's content: as json.loads() parses it, except that a ``hosts`` object is read one host at a time
    whenever it is iterated (_Hosts); anything that is not plainly a JSON object with unique keys is json.loads()'s."""
    top: dict[str, Any] = {}
    names: list[str] = []

    def host(key: str, idx: int) -> int:
        names.append(key)
        return int(_DECODER.raw_decode(text, idx)[1])

    def member(key: str, idx: int) -> int:
        if key in top:
            raise ValueError("duplicate key %r" % key)
        if key == "hosts" and text.startswith("{", idx):
            top[key] = _Hosts(text, idx, names)
            return _members(text, idx, host)
        top[key], end = _DECODER.raw_decode(text, idx)
        return int(end)
    try:
        end = _members(text, 0, member)
        if _skip(text, end) != len(text) or len(set(names)) != len(names):
            raise ValueError("trailing text or a host named twice")
    except ValueError:
        return json.loads(text)  # its own error for a text that is not JSON, or the whole parse of an unusual one
    return top


def read_snapshots(directory: str, limit: int, problems: list[str]) -> Iterator[Mapping[str, Any]]:
    """The newest ``limit`` readable snapshots, oldest first (their hosts parsed as they are read: parse_snapshot).
    An unreadable or malformed one is a line in problems naming it (and is renamed aside, see the module docstring),
    never an error; a directory that cannot be listed (a hung mount, past state_files.READ_TIMEOUT_S) is one line."""
    try:
        names = _snapshot_names(state_files.list_dir(directory)) if limit > 0 else []
    except FileNotFoundError:
        names = []  # no run kept one yet
    except OSError as exc:
        problems.append("history: not read this run: %s" % " ".join(str(exc).split()))
        names = []
    for name in names[-limit:]:
        snap = None  # the one yielded before is not held while this one is parsed
        path = os.path.join(directory, name)
        try:
            snap = parse_snapshot(state_files.read_text(path))
            problem = snapshot_problem(snap)
        except FileNotFoundError:
            continue  # removed since the listing (by an operator: runs take turns under the lock)
        except (OSError, ValueError) as exc:
            reason = " ".join(str(exc).split())
            # bad JSON and what is no regular file are set aside; a file that cannot be opened (permissions) or
            # whose read hung is left for the operator
            aside = isinstance(exc, ValueError) or (isinstance(exc, state_files.StateFileError) and not isinstance(exc, state_files.ReadTimedOut))
            problems.append("history: skipped %s: %s; %s" % (path, reason, _set_aside(path) if aside else "left in place"))
            continue
        if problem is not None:
            problems.append("history: skipped %s: %s; %s" % (path, problem, _set_aside(path)))
            continue
        yield snap


def snapshot_text(snap: Mapping[str, Any]) -> Iterator[str]:
    """``json.dumps(snap, sort_keys=True, separators=(",", ":")) + "\\n"``, one host at a time."""
    yield "{"
    for n, key in enumerate(sorted(snap)):
        value = snap[key]
        yield "%s%s:" % ("," if n else "", _COMPACT.encode(key))
        if key != "hosts" or not isinstance(value, Mapping):
            yield _COMPACT.encode(value)
            continue
        hosts = ((name, value[name]) for name in sorted(value)) if isinstance(value, dict) else sorted(value.items(), key=_first)
        yield "{"
        for m, (name, record) in enumerate(hosts):
            yield "%s%s:%s" % ("," if m else "", _COMPACT.encode(name), _COMPACT.encode(record))
        yield "}"
    yield "}\n"


def _first(pair: tuple[str, Any]) -> str:
    return pair[0]


def write_snapshot(directory: str, snap: Mapping[str, Any], now: datetime.datetime, keep: int) -> str:
    """Write this run's snapshot atomically, one host at a time, then delete the oldest beyond ``keep``. Returns the
    path."""
    path = os.path.join(directory, snapshot_name(now))
    write_atomic(path, snapshot_text(snap))
    for name in snapshot_files(directory)[:-keep]:
        try:
            os.unlink(os.path.join(directory, name))
        except FileNotFoundError:
            pass  # already gone: the goal of the pruning
    return path

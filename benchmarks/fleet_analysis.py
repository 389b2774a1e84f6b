"""Cost and memory per host of the fleet_report callback's end of a play at 1,000 vs 100,000 synthetic hosts.

Each host has a whole doctor result as a real GPU host of its class returns it: doctor's own run() at its default
level over recorded probe data (tests/support/whole_host.py: per-GPU clocks, power, ECC and PCIe counters, NVLink,
InfiniBand and AER counters, the placement score...), ~5 % of its checks planted FAIL or WARN, and a profile
summary, in 4 hardware classes. The timed work is the callback's own v2_playbook_on_stats on a collector holding
every host (continuum.hydra.fleet_report, its cyclic-GC pause included; --with-gc measures without it): build the
report, analyse it (classes, drift, stragglers, error counters, interconnect, placement, bottleneck, batch plan,
history folded from 3 earlier snapshots read from disk), write the history snapshot, fold the findings store (the
findings of an earlier run already in it), write the evidence files, every format (JSON + its timestamped copy,
Markdown, HTML, JUnit, Prometheus) and the batch plan, and render the terminal summary. Every timed run starts from
the same files, so every run writes the same report.

Rounds alternate the two sizes (each round runs the small size --small-runs times, its figure their median, then the
large size once); the figure is the median per-host time at the large size over the median at the small one.
Memory is the tracemalloc peak of one run beyond its inputs (the host results the collector holds), per host. The
report digest (SHA-256 of each written format, the work directory's path replaced) is the same for a seed whatever
the code's memory layout: compare it before and after a change.

    PYTHONPATH=collections .venv/bin/python benchmarks/fleet_analysis.py [--rounds 3] [--sizes 1000 100000]
    PYTHONPATH=collections .venv/bin/python benchmarks/fleet_analysis.py --profile 10000   # where the memory goes
    PYTHONPATH=collections .venv/bin/python benchmarks/fleet_analysis.py --step-times      # which step's time grows

Targets (issue 30): per-host cost at the large size <= 1.1 x at the small; memory <= 12 KB per host beyond the
inputs at the large size (a fixed part of a few MB weighs on the small one; the line before the verdicts gives both
parts). The last lines say PASS or FAIL for each; the exit status is 1 when one FAILs.
About 165 KB of inputs per host: a 100,000-host run needs ~17 GB of memory and ~14 GB of disk (check `free -g`).
"""

import argparse
import datetime
import gc
import hashlib
import json
import linecache
import os
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
import types

from ansible_collections.continuum.hydra.plugins.callback import fleet_report
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import analysis, findings, history, interconnect, state_files
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import formats
from ansible_collections.continuum.hydra.tests.support.helpers import CapturedDisplay
from ansible_collections.continuum.hydra.tests.support.whole_host import whole_fleet

EARLIER_RUNS = 3
NOW = datetime.datetime(2026, 11, 26, 13, 0, 0, tzinfo=datetime.timezone.utc)
MAX_RATIO = 1.1
MAX_KB_PER_HOST = 12.0
WHOLE = "(the whole end of play)"


def settings(work_dir, n):
    report_dir = os.path.join(work_dir, "reports")
    return {"report_dir": report_dir, "formats": list(formats.FORMAT_NAMES), "history_keep": EARLIER_RUNS + 1,
            "state_lock_timeout": 60.0, "straggler_history_runs": 3, "straggler_rule": {}, "history_dir": os.path.join(report_dir, "history"),
            "class_groups": [], "expected": None, "placement_threshold": 60.0,
            "batch": {"global_batch_size": 4 * n, "memory_per_sample_mib": 500, "metric": "bf16_tflops"}}


def callback(fleet, work_dir):
    """The fleet_report callback as a play leaves it before its stats: every host's doctor and profile taken."""
    module = fleet_report.CallbackModule()
    module._display = CapturedDisplay()
    module._settings = settings(work_dir, len(fleet.hosts))
    module._playbook = "doctor.yml"
    module._ran_hydra_task = True
    for name in sorted(fleet.hosts):
        record = fleet.hosts[name]
        module._collector.add_doctor(name, record["doctor"])
        module._collector.add_profile(name, record["profile"])
    return module


class FixedClock(datetime.datetime):
    """The callback's clock, fixed: every run writes the same report (the digest compares them)."""

    @classmethod
    def now(cls, tz=None):
        return NOW if tz is not None else NOW.replace(tzinfo=None)


def end_of_play(module):
    """v2_playbook_on_stats at NOW; (seconds, the lines it printed)."""
    real = fleet_report.datetime
    fleet_report.datetime = types.SimpleNamespace(datetime=FixedClock, timezone=datetime.timezone, timedelta=datetime.timedelta)
    try:
        start = time.perf_counter()
        module.v2_playbook_on_stats(None)
        return time.perf_counter() - start, module._display.lines
    finally:
        fleet_report.datetime = real


def prepare(fleet, work_dir):
    """Earlier runs on disk, so every timed run starts from the same files: 3 history snapshots and the findings
    store of an earlier run of this fleet (kept aside, put back before each run)."""
    module = callback(fleet, work_dir)
    end_of_play(module)
    directory = module._settings["history_dir"]
    (name,) = history.snapshot_files(directory)
    with open(os.path.join(directory, name), encoding="utf-8") as handle:
        snap = json.loads(handle.read())
    os.unlink(os.path.join(directory, name))
    base = datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc)
    for n in range(EARLIER_RUNS):
        history.write_snapshot(directory, earlier(snap, EARLIER_RUNS - n), base + datetime.timedelta(days=n), EARLIER_RUNS)
    store = findings.store_path(directory)
    shutil.copyfile(store, store + ".earlier")
    reset(work_dir)


def earlier(snap, days):
    """The snapshot as a run ``days`` days before would have left it: its interconnect readings taken that much earlier
    (the timed run's rates are then over a day or more, as between real runs: no counter moved, nothing to report)."""
    out = dict(snap, hosts={})
    for host, record in snap["hosts"].items():
        record = dict(record)
        if record.get("interconnect"):
            value = json.loads(record["interconnect"])
            for kind in ("ib", "nvlink", "aer"):
                if kind in value:
                    value[kind]["t"] -= days * 86400.0
            record["interconnect"] = interconnect.stored(value)
        out["hosts"][host] = record
    return out


def reset(work_dir):
    """The files as prepare() left them: the earlier snapshots, the earlier findings store, no reports."""
    report_dir = os.path.join(work_dir, "reports")
    directory = os.path.join(report_dir, "history")
    for name in history.snapshot_files(directory)[EARLIER_RUNS:]:
        os.unlink(os.path.join(directory, name))
    store = findings.store_path(directory)
    shutil.copyfile(store + ".earlier", store)
    for name in os.listdir(report_dir):
        path = os.path.join(report_dir, name)
        if name != "history":
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)


def run(fleet, work_dir, with_gc=False):
    """One end of a play from the prepared files: (seconds per host, lines printed)."""
    reset(work_dir)
    module = callback(fleet, work_dir)
    if with_gc:
        paused, analysis.cyclic_gc_paused = analysis.cyclic_gc_paused, _not_paused
        fleet_report.cyclic_gc_paused = _not_paused
    try:
        seconds, lines = end_of_play(module)
    finally:
        if with_gc:
            analysis.cyclic_gc_paused = fleet_report.cyclic_gc_paused = paused
    return seconds / len(fleet.hosts), lines


class _not_paused:  # pylint: disable=invalid-name
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def digest(work_dir):
    """SHA-256 of each file the run wrote (the work directory's path replaced), by file name: every format, the batch
    plan, the findings store, the history snapshot, the evidence files."""
    out = {}
    report_dir = os.path.join(work_dir, "reports")
    history_dir = os.path.join(report_dir, "history")
    written = [f for _unused, f, _unused2 in formats.FORMATS] + ["batch-plan.json", "batch-plan.yaml", "history/findings.json",
                                                                 "history/" + history.snapshot_files(history_dir)[-1]]
    for filename in written:
        sha = hashlib.sha256()
        with open(os.path.join(report_dir, filename), "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                sha.update(block.replace(work_dir.encode(), b"<work>"))
        out[filename.split("/fleet-history-")[0] + ("/snapshot" if "fleet-history-" in filename else "")] = sha.hexdigest()[:16]
    evidence = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(os.path.join(report_dir, "evidence"))):
        dirs.sort()
        for name in sorted(files):
            with open(os.path.join(root, name), "rb") as handle:
                evidence.update(name.encode() + handle.read())
    out["evidence/"] = evidence.hexdigest()[:16]
    return out


def peak_memory(fleet, work_dir):
    """tracemalloc's peak of one run beyond what was allocated before it (the inputs), in bytes."""
    reset(work_dir)
    module = callback(fleet, work_dir)
    gc.collect()
    tracemalloc.start()
    end_of_play(module)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


# The steps of the end of a play whose memory --profile reports: (module, attribute) wrapped while it runs.
STEPS = (("callback", "FleetCollector.build"), ("callback", "CallbackModule._analyse"), ("analysis", "classify"),
         ("analysis", "analyse_drift"), ("analysis", "analyse_stragglers"),
         ("analysis", "analyse_error_counters"), ("analysis", "analyse_workloads"), ("analysis", "analyse_placement"),
         ("analysis", "plan_batches"), ("analysis", "_interconnect"), ("analysis", "_history_stragglers"),
         ("history", "snapshot"), ("state_files", "read_text"), ("history", "parse_snapshot"), ("history", "HistoryFold.add"),
         ("history", "HistoryFold.result"),
         ("callback", "CallbackModule._write_history"), ("callback", "CallbackModule._update_findings"),
         ("callback", "CallbackModule._write_evidence"), ("formats", "write_report"),
         ("callback", "CallbackModule._write_batch_plan"), ("callback", "terminal.render"), ("formats", "write_atomic"),
         ("os", "fsync"))


class Steps:
    """tracemalloc's view of each step: memory held when it starts and ends, its own peak (nested steps included),
    and a by-line snapshot of the moment the most memory was held at a step's start or end."""

    def __init__(self, at=None):
        self.stack = []
        self.rows = {}
        self.most = 0
        self.snapshot = None
        self.where = None
        self.at = at  # "end of <step>": the moment of the by-line snapshot instead of the most held

    def _look(self, where):
        current = tracemalloc.get_traced_memory()[0]
        if self.at is not None:
            if where == self.at and self.snapshot is None:
                self.most, self.where, self.snapshot = current, where, tracemalloc.take_snapshot()
        elif current > self.most * 1.05:  # a snapshot costs a walk of every block: only at a new high
            self.most, self.where = current, where
            self.snapshot = tracemalloc.take_snapshot()

    def wrap(self, name, func):
        def step(*args, **kwargs):
            if self.stack:
                self.stack[-1][1] = max(self.stack[-1][1], tracemalloc.get_traced_memory()[1])
            self._look("start of " + name)
            tracemalloc.reset_peak()
            self.stack.append([tracemalloc.get_traced_memory()[0], 0])
            try:
                return func(*args, **kwargs)
            finally:
                self._look("end of " + name)
                start, peak = self.stack.pop()
                peak = max(peak, tracemalloc.get_traced_memory()[1])
                row = self.rows.setdefault(name, [0, 0, 0, 0])
                row[0] += 1
                row[1], row[2], row[3] = max(row[1], start), max(row[2], peak), max(row[3], tracemalloc.get_traced_memory()[0])
                if self.stack:
                    self.stack[-1][1] = max(self.stack[-1][1], peak)
                tracemalloc.reset_peak()
        return step


class StepTimes:
    """Wall and CPU time of each step (STEPS), summed over its calls; a step's time includes the steps it calls. Wall
    time the CPU did not spend is waiting: on the disk (fsync) or for memory the kernel must first reclaim."""

    def __init__(self):
        self.seconds = {}
        self.cpu = {}

    def wrap(self, name, func):
        def step(*args, **kwargs):
            start, cpu = time.perf_counter(), time.process_time()
            try:
                return func(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
                self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - cpu
        return step


def _patch(steps):
    """Wrap each step (STEPS); returns how to undo it."""
    spaces = {"callback": fleet_report, "analysis": analysis, "history": history, "formats": formats, "state_files": state_files,
              "os": os}
    undo = []
    for space, dotted in STEPS:
        owner = spaces[space]
        *path, attr = dotted.split(".")
        for part in path:
            owner = getattr(owner, part)
        real = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        setattr(owner, attr, steps.wrap(dotted, real))
        undo.append((owner, attr, real))
    return undo


def profile(fleet, work_dir, at=None, top=30):
    """Where the memory goes: each step's memory, then the largest allocation sites by line at the moment the most
    was held at a step's start or end (or at ``at``: "start of <step>" or "end of <step>")."""
    reset(work_dir)
    module = callback(fleet, work_dir)
    gc.collect()
    steps = Steps(at)
    undo = _patch(steps)
    tracemalloc.start()
    try:
        end_of_play(module)
    finally:
        overall = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        for owner, attr, real in undo:
            setattr(owner, attr, real)
    n = len(fleet.hosts)
    kb = 1024.0 * n
    print("peak %.1f KB per host beyond the inputs; the most held at a step's edge: %.1f KB per host (%s)" % (
        overall / kb, steps.most / kb, steps.where))
    print("step (calls): KB per host held at its start / its peak / held at its end")
    for name, (calls, start, peak, end) in steps.rows.items():
        print("  %-36s (%5d) %7.2f %7.2f %7.2f" % (name, calls, start / kb, peak / kb, end / kb))
    if steps.snapshot is None:
        return
    snap = steps.snapshot.filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    print("by line, %s:" % steps.where)
    for stat in snap.statistics("lineno")[:top]:
        frame = stat.traceback[0]
        source = linecache.getline(frame.filename, frame.lineno).strip()[:90]
        print("  %7.2f KB/host %9d blocks  %s:%d  %s" % (stat.size / kb, stat.count, _short(frame.filename), frame.lineno, source))


def _short(path):
    marker = "continuum/hydra/"
    return path.split(marker, 1)[1] if marker in path else os.path.basename(path)


def verdict(name, value, limit, unit):
    ok = value <= limit
    print("%s: %s %.2f%s (target <= %g%s)" % ("PASS" if ok else "FAIL", name, value, unit, limit, unit))
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs=2, default=[1000, 10000])
    parser.add_argument("--small-runs", type=int, default=5, help="runs of the small size in each round (their median)")
    parser.add_argument("--seed", type=int, default=None, help="the fleets' seed (default: each size its own)")
    parser.add_argument("--with-gc", action="store_true", help="leave the cyclic garbage collector on (for comparison)")
    parser.add_argument("--profile", type=int, metavar="HOSTS", help="only show where the memory goes at this size")
    parser.add_argument("--digest", type=int, metavar="HOSTS", help="only run once at this size and print the report digest")
    parser.add_argument("--at", help="with --profile: the moment of the by-line view, 'start of STEP' or 'end of STEP'")
    parser.add_argument("--step-times", action="store_true", help="only show each step's time per host at both sizes")
    parser.add_argument("--max-ratio", type=float, default=MAX_RATIO)
    parser.add_argument("--max-kb", type=float, default=MAX_KB_PER_HOST)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="hydra-bench-")
    try:
        if args.profile:
            fleet = whole_fleet(args.profile, args.seed or args.profile)
            work = os.path.join(root, "p")
            prepare(fleet, work)
            profile(fleet, work, args.at)
            return 0
        if args.digest:
            fleet = whole_fleet(args.digest, args.seed or args.digest)
            work = os.path.join(root, "d")
            prepare(fleet, work)
            seconds, lines = run(fleet, work)
            print("%d hosts: %.0f us per host, %d terminal lines" % (args.digest, seconds * 1e6, len(lines)))
            print("report digest at %d hosts (seed %d): %s" % (args.digest, args.seed or args.digest, " ".join(
                "%s=%s" % kv for kv in sorted(digest(work).items()))))
            return 0
        return step_times(args, root) if args.step_times else measure(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _sizes_of_a_round(args):
    """The runs of one round: the small size ``--small-runs`` times (the round's figure is their median), then the large
    size once. A 1,000-host run lasts seconds and so catches the machine's passing noise (its rounds spread 4.0-6.1 ms
    a host on 2026-11-27), which a 100,000-host run of ten minutes averages over."""
    small_n, large_n = args.sizes
    return [small_n] * args.small_runs + [large_n]


def build(args, root):
    """({size: fleet}, {size: its prepared work directory}) of both sizes."""
    fleets, dirs = {}, {}
    for n in args.sizes:
        started = time.perf_counter()
        fleets[n] = whole_fleet(n, args.seed or n)
        dirs[n] = os.path.join(root, str(n))
        prepare(fleets[n], dirs[n])
        print("built and prepared %d hosts in %.0f s" % (n, time.perf_counter() - started), flush=True)
    return fleets, dirs


def step_times(args, root):
    """Which step's cost per host grows with the fleet: each step's wall and CPU time per host at both sizes (median of
    every run of the rounds, run alternately) and their ratios, largest growth first."""
    small_n, large_n = args.sizes
    fleets, dirs = build(args, root)
    rounds = {small_n: [], large_n: []}
    for _unused in range(args.rounds):
        for n in _sizes_of_a_round(args):
            timer = StepTimes()
            undo = _patch(timer)
            cpu = time.process_time()
            try:
                total, _lines = run(fleets[n], dirs[n])
            finally:
                for owner, attr, real in undo:
                    setattr(owner, attr, real)
            timer.seconds[WHOLE] = total * n
            timer.cpu[WHOLE] = time.process_time() - cpu
            rounds[n].append(timer)
            print("  %d hosts: %.0f us per host (CPU %.0f)" % (n, total * 1e6, timer.cpu[WHOLE] * 1e6 / n), flush=True)
    print("step: us per host at %d / at %d hosts (median of every run of %d rounds), ratio; the same of CPU time" % (
        small_n, large_n, args.rounds))

    def per_host(kind, name):
        """(at the small size, at the large): the median us per host of a step's wall (seconds) or CPU (cpu) time."""
        return tuple(statistics.median(getattr(r, kind).get(name, 0.0) for r in rounds[n]) * 1e6 / n for n in (small_n, large_n))

    rows = sorted(((per_host("seconds", name), per_host("cpu", name), name) for name in rounds[small_n][0].seconds),
                  key=lambda row: row[0][1] - row[0][0], reverse=True)
    for (small, large), (cpu_small, cpu_large), name in rows:
        print("  %-36s %9.1f %9.1f  %5.2f   CPU %9.1f %9.1f  %5.2f" % (
            name, small, large, large / small if small else float("nan"), cpu_small, cpu_large,
            cpu_large / cpu_small if cpu_small else float("nan")))
    small, large = per_host("seconds", WHOLE)
    (step_small, step_large), _cpu, name = next(row for row in rows if row[2] != WHOLE)
    # Where to look first: the step adding the most per host (a step whose work grows with the fleet, such as a scan
    # of every host's findings for each host, stands out here; at sizes of seconds, noise of a few hundred us).
    print("the most growth: %s, %+.0f us per host (the whole may grow %.0f)" % (
        name, step_large - step_small, (args.max_ratio - 1.0) * small))
    ok = verdict("per-host cost %d / %d hosts" % (large_n, small_n), large / small, args.max_ratio, "x")
    return 0 if ok else 1


def measure(args, root):
    small_n, large_n = args.sizes
    fleets, dirs = build(args, root)
    per_host = {small_n: [], large_n: []}
    lines = {}
    for _unused in range(args.rounds):
        runs = dict((n, []) for n in args.sizes)
        for n in _sizes_of_a_round(args):
            seconds, lines[n] = run(fleets[n], dirs[n], args.with_gc)
            runs[n].append(seconds)
            print("  %d hosts: %.0f us per host" % (n, seconds * 1e6), flush=True)
        for n in args.sizes:
            per_host[n].append(statistics.median(runs[n]))
    digests = dict((n, digest(dirs[n])) for n in (small_n, large_n))
    sizes = dict((f, os.path.getsize(os.path.join(dirs[large_n], "reports", f))) for dummy, f, dummy2 in formats.FORMATS)
    peaks = dict((n, peak_memory(fleets[n], dirs[n])) for n in (small_n, large_n))
    small, large = statistics.median(per_host[small_n]), statistics.median(per_host[large_n])
    gpus = sum(len(v["doctor"]["environment"]["gpus"]) for v in fleets[large_n].hosts.values()) / float(large_n)
    print("checks in the catalogue: %d; GPUs per host: %.1f; earlier runs in history: %d; terminal lines: %d" % (
        len(CATALOGUE), gpus, EARLIER_RUNS, len(lines[large_n])))
    print("per host: %d hosts %.0f us, %d hosts %.0f us; ratio %.3f" % (small_n, small * 1e6, large_n, large * 1e6, large / small))
    print("rounds (us per host): %s" % dict((n, [round(v * 1e6) for v in per_host[n]]) for n in per_host))
    print("file sizes at %d hosts (KB per host): %s" % (large_n, ", ".join(
        "%s %.1f" % (f, s / 1024.0 / large_n) for f, s in sorted(sizes.items()))))
    for n in (small_n, large_n):
        print("report digest at %d hosts (seed %d): %s" % (n, args.seed or n, " ".join(
            "%s=%s" % kv for kv in sorted(digests[n].items()))))
    # Peak = a fixed part (module state, the largest single group's work) + a part per host: the two sizes give both.
    per_extra = (peaks[large_n] - peaks[small_n]) / 1024.0 / (large_n - small_n)
    print("peak memory beyond the inputs: %.2f KB/host at %d hosts, %.2f KB/host at %d; %.2f KB per extra host "
          "and %.1f MB fixed" % (peaks[small_n] / 1024.0 / small_n, small_n, peaks[large_n] / 1024.0 / large_n, large_n,
                                 per_extra, (peaks[small_n] / 1024.0 - per_extra * small_n) / 1024.0))
    ok = verdict("per-host cost %d / %d hosts" % (large_n, small_n), large / small, args.max_ratio, "x")
    # The target is the fleet's size (issue 30: 100,000 hosts), where the fixed part no longer counts.
    ok = verdict("peak memory beyond the inputs at %d hosts" % large_n, peaks[large_n] / 1024.0 / large_n, args.max_kb, " KB/host") and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

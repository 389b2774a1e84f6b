"""Cost per host of the whole controller side at 1,000 vs 10,000 synthetic hosts, in one script.

Each host has a realistic doctor result (the whole check catalogue, a mix of statuses, per-GPU details,
the environment of a recorded nvidia-smi) and a profile summary, in 4 hardware classes. The timed work
is what the callback does at the end of a play: add every host, build the report, analyse it (classes,
drift, stragglers, bottleneck, batch plan, history folded from 3 earlier snapshots read from disk), render
and write every format (JSON + timestamped copy, Markdown, HTML, JUnit, Prometheus), write the history
snapshot and render the terminal summary, with the cyclic garbage collector paused as the callback does
(--with-gc measures without the pause). Rounds alternate the two sizes; the figure is the median
per-host time at 10k over the median per-host time at 1k. Memory is the tracemalloc peak of one run
beyond its inputs, per host.

    PYTHONPATH=collections .venv/bin/python benchmarks/fleet_analysis.py [--rounds 3] [--sizes 1000 10000]
Targets (issue 5): per-host cost at 10k <= 1.2 x at 1k; memory <= 20 KB per host.
"""

import argparse
import datetime
import os
import random
import shutil
import statistics
import tempfile
import time
import tracemalloc

from ansible_collections.continuum.hydra.plugins.module_utils._atomic import write_atomic
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import history
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse, cyclic_gc_paused
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import formats, terminal
from ansible_collections.continuum.hydra.tests.support.fleet_factory import SyntheticFleet, random_checks

SHARES = {"a100x8": 0.4, "a10gx4": 0.3, "t4x1": 0.2, "ada4000x2": 0.1}
EARLIER_RUNS = 3


def build(n, seed):
    sizes = dict((name, int(round(n * share))) for name, share in SHARES.items())
    fleet = SyntheticFleet(sizes, seed=seed, cv=0.02)
    rng = random.Random(seed)
    for record in fleet.hosts.values():
        record["doctor"]["checks"] = random_checks(rng, record["doctor"]["environment"])
    for host in rng.sample(sorted(fleet.hosts), max(1, n // 100)):
        fleet.slow_host(host, rng.uniform(0.7, 0.85), "triad_gbps")
    return fleet


def run(fleet, work_dir):
    """What the callback's v2_playbook_on_stats does, with the cyclic collector paused as it does."""
    with cyclic_gc_paused():
        return _run(fleet, work_dir)


def _run(fleet, work_dir):
    report_dir = os.path.join(work_dir, "reports")
    history_dir = os.path.join(work_dir, "history")
    start = time.perf_counter()
    collector = FleetCollector()
    for name, record in fleet.hosts.items():
        collector.add_doctor(name, record["doctor"])
        collector.add_profile(name, record["profile"])
    now = datetime.datetime.now(datetime.timezone.utc)
    report = collector.build(now.isoformat(timespec="seconds"), "doctor.yml")
    problems = []
    options = AnalysisOptions(history=history.read_snapshots(history_dir, EARLIER_RUNS, problems), problems=problems,
                              batch={"global_batch_size": 4 * len(fleet.hosts), "memory_per_sample_mib": 500})
    analyse(report, options)
    history.write_snapshot(history_dir, options.current_snapshot, now, EARLIER_RUNS + 1)
    options.current_snapshot = None
    for _unused, filename, render in formats.FORMATS:
        write_atomic(os.path.join(report_dir, filename), render(report))
    terminal.render(report)
    return (time.perf_counter() - start) / len(fleet.hosts), report


def prepare(fleet, work_dir):
    """Earlier runs' snapshots on disk, so every timed run folds the same history."""
    dummy, report = run(fleet, work_dir)
    snap = history.snapshot(report)
    shutil.rmtree(os.path.join(work_dir, "history"))
    base = datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc)
    for n in range(EARLIER_RUNS):
        history.write_snapshot(os.path.join(work_dir, "history"), snap, base + datetime.timedelta(days=n), EARLIER_RUNS)


def reset_history(work_dir):
    """Keep the earlier snapshots only (the last run added one and pruned the oldest)."""
    directory = os.path.join(work_dir, "history")
    names = history.snapshot_files(directory)
    for name in names[EARLIER_RUNS:]:
        os.unlink(os.path.join(directory, name))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs=2, default=[1000, 10000])
    parser.add_argument("--with-gc", action="store_true", help="leave the cyclic garbage collector on (for comparison)")
    args = parser.parse_args()
    if args.with_gc:
        global run  # pylint: disable=global-statement
        run = _run
    small_n, large_n = args.sizes
    root = tempfile.mkdtemp(prefix="hydra-bench-")
    try:
        fleets, dirs = {}, {}
        for n in (small_n, large_n):
            fleets[n] = build(n, seed=n)
            dirs[n] = os.path.join(root, str(n))
            prepare(fleets[n], dirs[n])
        per_host = {small_n: [], large_n: []}
        for _unused in range(args.rounds):
            for n in (small_n, large_n):
                reset_history(dirs[n])
                per_host[n].append(run(fleets[n], dirs[n])[0])
        small, large = statistics.median(per_host[small_n]), statistics.median(per_host[large_n])
        peaks = {}
        for n in (small_n, large_n):
            reset_history(dirs[n])
            tracemalloc.start()
            run(fleets[n], dirs[n])
            peaks[n] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        sizes = dict((f, os.path.getsize(os.path.join(dirs[large_n], "reports", f))) for dummy, f, dummy2 in formats.FORMATS)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("checks per host: %d; GPUs per host: %.1f; earlier runs in history: %d" % (
        len(CATALOGUE), sum(len(v["profile"]["gpus"]) for v in fleets[large_n].hosts.values()) / float(large_n), EARLIER_RUNS))
    print("per host: %dk %.0f us, %dk %.0f us; ratio %.3f (target <= 1.2)" % (
        small_n // 1000, small * 1e6, large_n // 1000, large * 1e6, large / small))
    print("rounds (us per host): %s" % dict((n, [round(v * 1e6) for v in per_host[n]]) for n in per_host))
    for n in (small_n, large_n):
        print("peak memory beyond the inputs at %dk: %.1f KB per host (target <= 20)" % (n // 1000, peaks[n] / float(n) / 1024))
    print("file sizes at %dk (KB per host): %s" % (large_n // 1000, ", ".join("%s %.1f" % (f, s / 1024.0 / large_n) for f, s in sorted(sizes.items()))))


if __name__ == "__main__":
    main()

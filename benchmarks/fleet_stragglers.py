"""Straggler detection fidelity: 10,000 synthetic hosts in 4 hardware classes, 1 % slowed by 15-30 %.

Every host has 4 host figures and 3 figures per GPU (1 to 8 GPUs), each the class reference with Gaussian
noise of coefficient of variation CV. 1 % of the hosts are slowed: one host figure, or one figure of one
GPU, multiplied by a factor drawn uniformly in [0.70, 0.85] (latencies divided by it). The analysis is
the collection's own (plugins/plugin_utils/_fleet); a host counts as found when it, or one of its GPUs, is
reported as a straggler.

With --runs N the fleet is measured N times (fresh noise each run, the same hosts, GPUs and slowdowns,
as a lasting fault would be) and each run is analysed with the history snapshots of the runs before it,
so the history straggler rule (docs/fleet_analysis.md) judges the last run.

    PYTHONPATH=collections .venv/bin/python benchmarks/fleet_stragglers.py [--hosts 10000] [--cv 0.02 0.03 0.05] [--seeds 3] [--runs 1]
Targets (issue 5, one run): recall >= 95 %, false positives <= 0.5 % of the healthy hosts.
Targets (issue 13, --runs 3 at 5 % noise): recall >= 95 %, false positives <= 0.1 % of the healthy hosts.
"""

import argparse
import random

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.figures import host_figures
from ansible_collections.continuum.hydra.tests.support.fleet_factory import SyntheticFleet

CLASSES = ("a100x8", "a10gx4", "t4x1", "ada4000x2")


def trial(hosts, cv, seed, runs=1):
    fleet = SyntheticFleet(dict((c, hosts // len(CLASSES)) for c in CLASSES), seed=seed, cv=cv)
    rng = random.Random(seed * 7919)
    planted = set(rng.sample(sorted(fleet.hosts), hosts // 100))
    slowdowns = []
    for host in sorted(planted):
        factor = rng.uniform(0.70, 0.85)
        profile = fleet.hosts[host]["profile"]
        if rng.random() < 0.5:
            slowdowns.append((host, None, factor, rng.choice(sorted(host_figures(profile)))))
        else:
            gpu = rng.randrange(len(profile["gpus"]))
            slowdowns.append((host, gpu, factor, rng.choice(sorted(profile["gpus"][gpu]["figures"]))))
    snapshots = []
    for run in range(runs):
        if run:
            fleet.next_run(seed * 104729 + run)
        for host, gpu, factor, metric in slowdowns:
            if gpu is None:
                fleet.slow_host(host, factor, metric)
            else:
                fleet.slow_gpu(host, gpu, factor, metric)
        options = AnalysisOptions(history=list(snapshots) if runs > 1 else None)
        report = analyse(fleet.report(generated_at="2026-11-%02dT13:00:00+00:00" % (run + 1)), options)
        if options.current_snapshot is not None:
            snapshots.append(options.current_snapshot)
    stragglers = report["analysis"]["stragglers"]
    found = set(s["host"] for s in stragglers["hosts"]) | set(s["host"] for s in stragglers["gpus"])
    healthy = len(fleet.hosts) - len(planted)
    return len(found & planted) / float(len(planted)), len(found - planted) / float(healthy), len(found - planted)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10000)
    parser.add_argument("--cv", type=float, nargs="+", default=[0.02, 0.03, 0.05])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=1, help="runs measured, the last judged with the history of the others")
    args = parser.parse_args()
    print("hosts %d in %d classes, %d slowed by 15-30 %% per trial, %d seeds, %d run(s)" % (
        args.hosts, len(CLASSES), args.hosts // 100, args.seeds, args.runs))
    for cv in args.cv:
        results = [trial(args.hosts, cv, seed, args.runs) for seed in range(1, args.seeds + 1)]
        recall = min(r[0] for r in results)
        false_rate = max(r[1] for r in results)
        print("noise CV %.0f %%: recall min %.1f %% (targets >= 95 %%), false positives max %.3f %% of healthy hosts (%d hosts; target <= %s %%)" % (
            cv * 100, recall * 100, false_rate * 100, max(r[2] for r in results), "0.1" if args.runs > 1 else "0.5"))


if __name__ == "__main__":
    main()

"""Straggler detection fidelity: 10,000 synthetic hosts in 4 hardware classes, 1 % slowed by 15-30 %.

Every host has 4 host figures and 3 figures per GPU (1 to 8 GPUs), each the class reference with run-to-run
noise of coefficient of variation CV. 1 % of the hosts are slowed: one host figure, or one figure of one
GPU, multiplied by a factor drawn uniformly in [0.70, 0.85] (latencies divided by it). The analysis is
the collection's own (plugins/plugin_utils/_fleet); a host counts as found when it, or one of its GPUs, is
reported as a straggler.

With --runs N the fleet is measured N times (fresh noise each run, the same hosts, GPUs and slowdowns,
as a lasting fault would be) and each run is analysed with the history snapshots of the runs before it,
so the history straggler rule (docs/fleet_analysis.md) judges the last run.

Two worlds (--world):
- gaussian (the default): Gaussian noise, every fault in every run;
- heavy: Student-t noise of 3 degrees of freedom scaled to the same CV (default 5 %; a 15 % drop is 3 standard
  deviations but happens 0.7 % of the time, not 0.13 %), a lasting factor per host and per GPU of CV 2 % (silicon),
  and half the faults intermittent: absent from one of the N runs (drawn per fault), so seen in 2 of 3.
  --dof, --bias-cv and --intermittent override each part.

    PYTHONPATH=collections .venv/bin/python benchmarks/fleet_stragglers.py [--hosts 10000] [--cv 0.02 0.03 0.05] [--seeds 3] [--runs 1]
    PYTHONPATH=collections .venv/bin/python benchmarks/fleet_stragglers.py --world heavy --runs 3 --seeds 20
Targets (issue 5, one run): recall >= 95 %, false positives <= 0.5 % of the healthy hosts.
Targets (issue 13, --runs 3 at 5 % noise): recall >= 95 %, false positives <= 0.1 % of the healthy hosts.
Targets (issue 26, --world heavy --runs 3): recall >= 95 % (the intermittent faults included), false positives
<= 0.1 % of the healthy hosts.

--cost times the history straggler rule before issue 26 (kept below as previous_*) and this one, interleaved, on
the heavy world's third run: the history part alone (score the two earlier snapshots and this run, judge) and the
whole analysis of the run with its history, per host; the ratio is this rule / the previous one.
"""

import argparse
import contextlib
import math
import random
import statistics
import time

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import history as history_mod
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import stragglers
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.figures import host_figures, lower_is_better
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.stats import Spread
from ansible_collections.continuum.hydra.tests.support.fleet_factory import SyntheticFleet

CLASSES = ("a100x8", "a10gx4", "t4x1", "ada4000x2")
WORLDS = {"gaussian": {"dof": None, "bias_cv": 0.0, "intermittent": 0.0, "cv": [0.02, 0.03, 0.05]},
          "heavy": {"dof": 3, "bias_cv": 0.02, "intermittent": 0.5, "cv": [0.05]}}


def plant(fleet, hosts, seed, runs, intermittent):
    """The slowed hosts: (host, GPU index or None, factor, metric, run it is absent from or None)."""
    rng = random.Random(seed * 7919)
    planted = set(rng.sample(sorted(fleet.hosts), hosts // 100))
    slowdowns = []
    for host in sorted(planted):
        factor = rng.uniform(0.70, 0.85)
        profile = fleet.hosts[host]["profile"]
        if rng.random() < 0.5:
            where, metric = None, rng.choice(sorted(host_figures(profile)))
        else:
            where = rng.randrange(len(profile["gpus"]))
            metric = rng.choice(sorted(profile["gpus"][where]["figures"]))
        # drawn from a stream of its own so that the Gaussian world's faults are the ones it always had
        absent = None
        if runs > 1 and intermittent:
            draw = random.Random("%d:%s" % (seed, host))
            absent = draw.randrange(runs) if draw.random() < intermittent else None
        slowdowns.append((host, where, factor, metric, absent))
    return planted, slowdowns


def measure(fleet, slowdowns, seed, runs, rule=None):
    """Each run measured, its faults planted and analysed with the history of the runs before; the last report and
    the snapshots of every run."""
    snapshots = []
    for run in range(runs):
        if run:
            fleet.next_run(seed * 104729 + run)
        for host, gpu, factor, metric, absent in slowdowns:
            if absent == run:
                continue
            if gpu is None:
                fleet.slow_host(host, factor, metric)
            else:
                fleet.slow_gpu(host, gpu, factor, metric)
        options = AnalysisOptions(history=list(snapshots) if runs > 1 else None, straggler_rule=rule)
        report = analyse(fleet.report(generated_at="2026-11-%02dT13:00:00+00:00" % (run + 1)), options)
        if options.current_snapshot is not None:
            snapshots.append(options.current_snapshot)
    return report, snapshots


def trial(hosts, cv, seed, runs=1, dof=None, bias_cv=0.0, intermittent=0.0, rule=None):
    """(recall, recall of the intermittent faults or None, false positive share of healthy hosts, false positives)."""
    fleet = SyntheticFleet(dict((c, hosts // len(CLASSES)) for c in CLASSES), seed=seed, cv=cv, dof=dof, bias_cv=bias_cv)
    planted, slowdowns = plant(fleet, hosts, seed, runs, intermittent)
    slow = measure(fleet, slowdowns, seed, runs, rule)[0]["analysis"]["stragglers"]
    found = set(s["host"] for s in slow["hosts"]) | set(s["host"] for s in slow["gpus"])
    healthy = len(fleet.hosts) - len(planted)
    partial = set(s[0] for s in slowdowns if s[4] is not None)
    partial_recall = len(found & partial) / float(len(partial)) if partial else None
    return len(found & planted) / float(len(planted)), partial_recall, len(found - planted) / float(healthy), len(found - planted)


def summary(results, runs):
    recalls = [r[0] for r in results]
    partial = [r[1] for r in results if r[1] is not None]
    shares = [r[2] for r in results]
    text = "recall min %.1f %% (mean %.1f %%)" % (min(recalls) * 100, 100 * sum(recalls) / len(recalls))
    if partial:
        text += ", faults in %d of %d runs: min %.1f %% (mean %.1f %%)" % (runs - 1, runs, min(partial) * 100, 100 * sum(partial) / len(partial))
    text += "; false positives max %.3f %% of healthy hosts (%d hosts; mean %.3f %%)" % (
        max(shares) * 100, max(r[3] for r in results), 100 * sum(shares) / len(shares))
    return text


def previous_run_scores(samples, rule):
    """stragglers.run_scores before issue 26: z on the MAD scale alone."""
    for (_group, metric), pairs in samples.items():
        if len(pairs) < rule["min_peers"]:
            continue
        spread = Spread(sorted(v for _unused, v in pairs))
        lower_better = lower_is_better(metric)
        for key, value in pairs:
            ratio, z = stragglers._score(value, spread, lower_better)
            if ratio is not None and z is not None:
                yield key, metric, z, ratio, value, spread.median


def previous_judge_history(scores, current_run, rule):
    """stragglers.judge_history before issue 26: below the median in every run, sum(z) / sqrt(N) <= -4.0, mean
    ratio at least 10 % down."""
    runs = int(rule["history_runs"])
    slow, judged = {}, set()
    for key, metric, last in stragglers.complete_series(scores, current_run, runs):
        judged.add((key, metric))
        if any(score.ratio >= 1.0 for score in last):
            continue
        combined = sum(score.z for score in last) / math.sqrt(runs)
        mean_ratio = sum(score.ratio for score in last) / runs
        if combined <= -4.0 and mean_ratio <= 1.0 - rule["history_shortfall"]:
            slow.setdefault(key, []).append({"metric": metric, "value": last[-1].value, "median": last[-1].median,
                                             "ratio": mean_ratio, "robust_z": combined, "runs": runs, "basis": "history"})
    return slow, judged


@contextlib.contextmanager
def rule_of(previous):
    """The history fold scores and judges with the previous rule (previous=True) or this one."""
    saved = history_mod.run_scores, history_mod.judge_history
    if previous:
        history_mod.run_scores, history_mod.judge_history = previous_run_scores, previous_judge_history
    try:
        yield
    finally:
        history_mod.run_scores, history_mod.judge_history = saved


def cost(hosts, seed, rounds):
    world = WORLDS["heavy"]
    fleet = SyntheticFleet(dict((c, hosts // len(CLASSES)) for c in CLASSES), seed=seed, cv=0.05, dof=world["dof"], bias_cv=world["bias_cv"])
    dummy, slowdowns = plant(fleet, hosts, seed, 3, world["intermittent"])
    dummy, snapshots = measure(fleet, slowdowns, seed, 3)
    names = len(fleet.hosts)

    def history_part():
        fold = history_mod.HistoryFold()
        for snap in snapshots[:2]:
            fold.add(snap)
        fold.score(snapshots[2], 3)
        fold.history_stragglers(3)

    def whole():
        report = fleet.report(generated_at="2026-11-03T13:00:00+00:00")
        started = time.perf_counter()
        analyse(report, AnalysisOptions(history=list(snapshots[:2])))
        return time.perf_counter() - started

    times = {(part, previous): [] for part in ("history", "whole") for previous in (True, False)}
    for number in range(rounds):
        for previous in ((True, False) if number % 2 == 0 else (False, True)):
            with rule_of(previous):
                started = time.perf_counter()
                history_part()
                times[("history", previous)].append(time.perf_counter() - started)
                times[("whole", previous)].append(whole())
    print("cost at %d hosts (%d figures a run), median of %d interleaved rounds, per host:" % (
        names, sum(len(r["figures"]) + sum(len(g["figures"]) for g in r["gpus"].values()) for r in snapshots[2]["hosts"].values()), rounds))
    for part, what in (("history", "history part (score 3 runs, judge)"), ("whole", "whole analysis with history")):
        before, after = statistics.median(times[(part, True)]), statistics.median(times[(part, False)])
        print("  %s: previous rule %.1f us, this rule %.1f us, ratio %.3f" % (what, before / names * 1e6, after / names * 1e6, after / before))


def bound(world, cv, runs, healthy_hosts, faulty_hosts, seed):
    """The most any rule can find at 0.1 % (and 0.5 %) false positives in this world: the Bayes-optimal host score
    (the likelihood ratio of "one of its series slowed as planted" to "noise alone", each series weighted by how
    often plant() picks it) of a judge that knows the generator (the noise's law, the faults' law) and is even told
    every host's and GPU's lasting factor. Simulated with numpy on the same host shapes, not the analysis."""
    import numpy  # pylint: disable=import-outside-toplevel  # the bound only: the benchmark itself needs no numpy

    rng = numpy.random.default_rng(seed)
    dof = world["dof"]
    # The noise's law: 1 + cv x t, t a Student-t of dof degrees of freedom scaled to a standard deviation of 1.
    spread = math.sqrt((dof - 2.0) / dof) if dof else 1.0
    factors = numpy.linspace(0.70, 0.85, 31)  # plant()'s slowdowns
    patterns = [numpy.ones(runs)] + [numpy.arange(runs) != absent for absent in range(runs)]
    pattern_weights = [1.0 - world["intermittent"]] + [world["intermittent"] / runs] * runs

    def log_density(values):  # of a measured value over its reference, up to a constant
        u = (values - 1.0) / (cv * spread)
        return -0.5 * u * u if not dof else -(dof + 1) / 2.0 * numpy.log1p(u * u / dof)

    def log_ratio(x):  # x: (series, runs) -> log likelihood ratio of each series
        noise = log_density(x).sum(1)
        slowed = numpy.full(len(x), -numpy.inf)
        for pattern, weight in zip(patterns, pattern_weights):
            for f in factors:
                term = log_density(x / numpy.where(pattern, f, 1.0)).sum(1) - pattern.sum() * math.log(f)
                slowed = numpy.logaddexp(slowed, term + math.log(weight / len(factors)))
        return slowed - noise

    shapes = SyntheticFleet(dict((c, 1) for c in CLASSES), seed=1)
    scores = {}
    for faulty, hosts in ((False, healthy_hosts), (True, faulty_hosts)):
        found = []
        for name in sorted(shapes.hosts):
            profile = shapes.hosts[name]["profile"]
            n, host_series = hosts // len(CLASSES), len(host_figures(profile))
            gpu_series = [len(gpu["figures"]) for gpu in profile["gpus"]]
            weights = numpy.array([0.5 / host_series] * host_series + [0.5 / len(gpu_series) / k for k in gpu_series for _i in range(k)])
            noise = rng.standard_t(dof, (n, len(weights), runs)) if dof else rng.standard_normal((n, len(weights), runs))
            x = numpy.maximum(0.01, 1.0 + cv * spread * noise)
            if faulty:  # one series of each host, picked as plant() picks it (weights), slowed in its pattern's runs
                series = numpy.array([rng.choice(len(weights), p=weights) for _i in range(n)])
                absent = numpy.where(rng.random(n) < world["intermittent"], rng.integers(0, runs, n), -1)
                slow = numpy.where(numpy.arange(runs)[None, :] == absent[:, None], 1.0, rng.uniform(0.70, 0.85, n)[:, None])
                x[numpy.arange(n), series, :] *= slow
            ratios = log_ratio(x.reshape(-1, runs)).reshape(n, len(weights))
            found.append(numpy.logaddexp.reduce(ratios + numpy.log(weights), axis=1))
        scores[faulty] = numpy.concatenate(found)
    print("noise CV %.0f %%, bound (%d healthy and %d slowed hosts simulated, the lasting factors given):" % (cv * 100, healthy_hosts, faulty_hosts))
    for share in (0.001, 0.005):
        threshold = numpy.quantile(scores[False], 1.0 - share)
        print("  at %.1f %% false positives: recall at most %.1f %%" % (share * 100, 100.0 * (scores[True] > threshold).mean()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10000)
    parser.add_argument("--world", choices=sorted(WORLDS), default="gaussian")
    parser.add_argument("--cv", type=float, nargs="+", help="run-to-run noise (default: 2, 3, 5 %% gaussian; 5 %% heavy)")
    parser.add_argument("--dof", type=int, help="Student-t degrees of freedom of the noise (> 2; heavy: 3)")
    parser.add_argument("--bias-cv", type=float, help="lasting per-host and per-GPU factor (heavy: 0.02)")
    parser.add_argument("--intermittent", type=float, help="share of the faults absent from one run (heavy: 0.5)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=1, help="runs measured, the last judged with the history of all the others")
    parser.add_argument("--rule", nargs="+", default=[], metavar="KEY=NUMBER",
                        help="straggler rule settings over the defaults (stragglers.DEFAULT_RULE): tail_quantile=0")
    parser.add_argument("--cost", action="store_true", help="time the history rule, previous and this one (heavy world, 3 runs)")
    parser.add_argument("--rounds", type=int, default=5, help="--cost: interleaved rounds")
    parser.add_argument("--bound", action="store_true", help="the most any rule can find in the world at --runs (numpy)")
    args = parser.parse_args()
    try:
        rule = stragglers.parse_rule(args.rule)  # the callback's straggler_rule setting: one parser, one error text
    except ValueError as exc:
        parser.error("--rule %s" % exc)
    if args.runs > 1:
        rule[stragglers.RUNS_KEY] = args.runs  # the last run judged with the history of all the others
    if args.cost:
        cost(args.hosts, args.first_seed, args.rounds)
        return
    world = dict(WORLDS[args.world])
    for key in ("cv", "dof", "bias_cv", "intermittent"):
        if getattr(args, key) is not None:
            world[key] = getattr(args, key)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    if args.bound:
        for cv in world["cv"]:
            bound(world, cv, args.runs, 20 * args.hosts, args.hosts, args.first_seed)
        return
    print("hosts %d in %d classes, %d slowed by 15-30 %% per trial, %d seeds (%d-%d), %d run(s); %s noise, lasting bias CV %.0f %%, "
          "%.0f %% of the faults absent from one run" % (
              args.hosts, len(CLASSES), args.hosts // 100, args.seeds, seeds[0], seeds[-1], args.runs,
              "Student-t %d d.o.f." % world["dof"] if world["dof"] else "Gaussian", world["bias_cv"] * 100,
              world["intermittent"] * 100 if args.runs > 1 else 0) + ("; rule %s" % rule if rule else ""))
    for cv in world["cv"]:
        results = [trial(args.hosts, cv, seed, args.runs, world["dof"], world["bias_cv"], world["intermittent"], rule or None) for seed in seeds]
        print("noise CV %.0f %%: %s (targets: recall >= 95 %%, false positives <= %s %%)" % (
            cv * 100, summary(results, args.runs), "0.1" if args.runs > 1 else "0.5"))


if __name__ == "__main__":
    main()

"""Fleet report cost per host at 1,000 vs 10,000 synthetic host results, in one script.

Each host result is a realistic doctor result (the full catalogue with a mix of statuses and per-GPU
details); the timed work is what the callback does: add every host, build the report, serialise it
to JSON and render the terminal summary. Rounds alternate the two sizes; the figure is the median
per-host time at 10k divided by the median per-host time at 1k.

    PYTHONPATH=collections .venv/bin/python benchmarks/fleet_aggregation.py [--rounds 3]
Target (issue 3): per-host cost at 10k <= 1.2 x at 1k.
"""

import argparse
import copy
import json
import random
import statistics
import time
import tracemalloc

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import terminal
from ansible_collections.continuum.hydra.tests.support.fleet_factory import SyntheticFleet, doctor_result, random_checks


def synthetic_results(rng, count):
    """Doctor results of ``count`` 8-GPU hosts (recorded A100 environment), the whole catalogue judged with ~1 % FAIL,
    4 % WARN, 10 % SKIP; failures name a GPU."""
    fleet = SyntheticFleet({"a100x8": count}, seed=7)
    results = []
    for name in fleet.names("a100x8"):
        env = fleet.hosts[name]["doctor"]["environment"]
        results.append(doctor_result(env, random_checks(rng, env)))
    return results


def one_run(results):
    start = time.perf_counter()
    collector = FleetCollector()
    for i, result in enumerate(results):
        collector.add_doctor("node%05d" % i, result)
    report = collector.build("2026-11-22T00:00:00+00:00", "doctor.yml")
    json.dumps(report, sort_keys=True)
    terminal.render(report)
    return (time.perf_counter() - start) / len(results)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(7)
    template = synthetic_results(rng, 50)
    fleets = dict((n, [copy.deepcopy(template[i % 50]) for i in range(n)]) for n in (1000, 10000))
    per_host = {1000: [], 10000: []}
    for _unused in range(args.rounds):
        for n in (1000, 10000):
            per_host[n].append(one_run(fleets[n]))
    small, large = statistics.median(per_host[1000]), statistics.median(per_host[10000])
    tracemalloc.start()
    one_run(fleets[10000])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print("checks per host: %d" % len(template[0]["checks"]))
    print("per host: 1k %.1f us, 10k %.1f us; ratio 10k/1k %.3f (target <= 1.2)" % (small * 1e6, large * 1e6, large / small))
    print("aggregation peak memory at 10k beyond the inputs: %.1f KB per host" % (peak / 10000 / 1024))


if __name__ == "__main__":
    main()

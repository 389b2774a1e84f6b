"""Fleet report cost per host at 1,000 vs 10,000 synthetic host results, in one script.

Each host result is a realistic doctor result (the full catalogue with a mix of statuses and per-GPU
details); the timed work is what the callback does: add every host, build the report, serialise it
to JSON and render the terminal summary. Rounds alternate the two sizes; the figure is the median
per-host time at 10k divided by the median per-host time at 1k.

    .venv/bin/python benchmarks/fleet_aggregation.py [--rounds 3]
Target (issue 3): per-host cost at 10k <= 1.2 x at 1k.
"""

import argparse
import copy
import json
import os
import random
import statistics
import sys
import time
import tracemalloc

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "collections"))

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE  # noqa: E402
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector  # noqa: E402
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import terminal  # noqa: E402


def synthetic_result(rng, gpus=8):
    refs = [{"index": i, "pci_bus_id": "00000000:%02X:00.0" % (i + 16), "uuid": "GPU-%032x" % rng.getrandbits(128),
             "name": "NVIDIA H100 80GB HBM3"} for i in range(gpus)]
    checks = []
    for chk in CATALOGUE or [type("C", (), {"id": "x.%d" % i, "title": "t", "category": "x"}) for i in range(45)]:
        roll = rng.random()
        status = "FAIL" if roll < 0.01 else "WARN" if roll < 0.05 else "SKIP" if roll < 0.15 else "PASS"
        details = {"gpus": refs[:1]} if status in ("FAIL", "WARN") else {}
        checks.append({"id": chk.id, "title": chk.title, "category": chk.category, "status": status,
                       "message": "%s: %s" % (chk.id, status), "details": details,
                       "remediation": "fix %s" % chk.id if status != "PASS" else None, "duration_ms": 0.1})
    return {"schema_version": "1.1.0", "environment": {"hostname": "h", "gpus": refs}, "checks": checks}


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
    template = [synthetic_result(rng) for dummy in range(50)]
    fleets = dict((n, [copy.deepcopy(template[i % 50]) for i in range(n)]) for n in (1000, 10000))
    per_host = {1000: [], 10000: []}
    for dummy in range(args.rounds):
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

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Throughput of profile's benchmarks with the telemetry sampler running against without it, interleaved.

Three workloads, each run for --seconds with the sampler off, then on (its default 1 s interval,
and a 0.1 s stress interval), for --rounds rounds: the NumPy STREAM triad on every CPU (GB/s), the
pure-Python matmul loop (GFLOP/s; it holds the GIL the sampler thread needs), and O_DIRECT 4 KiB
random reads (IOPS; a GIL-bound Python loop). The figure is the median with the sampler over the median without.
Goal: >= 0.98. Without a GPU here the sampler reads /proc/stat only; on a GPU host NVML adds
about ten sub-millisecond calls per GPU per sample.

    PYTHONPATH=collections .venv/bin/python benchmarks/sampler_overhead.py [--seconds 2] [--rounds 4] [--directory /tmp]
"""

import argparse
import json
import os
import random
import statistics
import tempfile
import time

import numpy

from ansible_collections.continuum.hydra.plugins.module_utils._host import telemetry
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import (
    cpu_worker,
    disk,
    memory,
)
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.cpu import usable_cpus


def triad_gbps(kernels, team, seconds):
    moved, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        team.run("triad")
        moved += kernels.bytes_moved("triad")
    return moved / (time.perf_counter() - start) / 1e9


def python_gflops(seconds):
    return cpu_worker.matmul_stdlib(48, 0, seconds)["gflops"]


def disk_iops(path, blocks, seconds):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        latencies = disk.random_reads(fd, blocks, seconds, random.Random(7))
    finally:
        os.close(fd)
    return len(latencies) / (sum(latencies) / 1e9)


def with_sampler(interval_s, work):
    if interval_s is None:
        return work()
    sampler = telemetry.Sampler(interval_s)
    sampler.start()
    try:
        return work()
    finally:
        sampler.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--directory", default=tempfile.gettempdir())
    args = parser.parse_args()
    threads = usable_cpus()
    kernels = memory.StreamKernels(numpy, 128 * 1024 * 1024 // 8, threads)
    team = memory.ThreadTeam(kernels, threads)
    handle, path = tempfile.mkstemp(prefix="hydra-sampler-overhead-", dir=args.directory)
    os.close(handle)
    size = 256 * 1024 * 1024
    with open(path, "wb") as out:
        for _block in range(size // (1024 * 1024)):
            out.write(os.urandom(1024 * 1024))
    workloads = {
        "memory_triad_gbps": lambda: triad_gbps(kernels, team, args.seconds),
        "python_matmul_gflops": lambda: python_gflops(args.seconds),
        "disk_read_iops": lambda: disk_iops(path, size // disk.BLOCK_BYTES, args.seconds),
    }
    runs = dict((name, {"off": [], "1s": [], "0.1s": []}) for name in workloads)
    try:
        for round_index in range(args.rounds):
            for name, work in workloads.items():
                order = [("off", None), ("1s", 1.0), ("0.1s", 0.1)]
                if round_index % 2:
                    order.reverse()  # alternate the order so drift in the machine's load cancels out
                for label, interval in order:
                    runs[name][label].append(with_sampler(interval, work))
    finally:
        os.unlink(path)
        team.close()
    summary = {}
    for name, per in runs.items():
        off = statistics.median(per["off"])
        summary[name] = {"off_median": round(off, 2), "with_1s_over_without": round(statistics.median(per["1s"]) / off, 4),
                         "with_0.1s_over_without": round(statistics.median(per["0.1s"]) / off, 4)}
    sampler = telemetry.Sampler(1.0)
    start = time.perf_counter()
    for _sample in range(2000):
        sampler._read_stat()  # pylint: disable=protected-access
    cost_us = (time.perf_counter() - start) / 2000 * 1e6
    met = all(figures["with_1s_over_without"] >= 0.98 for figures in summary.values())
    print(json.dumps({"seconds": args.seconds, "rounds": args.rounds, "workloads": summary,
                      "cpu_sample_cost_us": round(cost_us, 1), "cpu_share_at_1s_interval_pct": round(cost_us / 1e4, 4),
                      "goal": "with/without >= 0.98 at the default 1 s interval", "met": met}, indent=2))


if __name__ == "__main__":
    main()

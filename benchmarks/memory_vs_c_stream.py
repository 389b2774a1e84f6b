# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""profile's NumPy STREAM triad against a C STREAM triad compiled with gcc -O3, interleaved on the same arrays.

The C kernels are STREAM's copy and triad loops (``#pragma omp parallel for``), built here with
``gcc -O3 -fopenmp`` and called through ctypes on the very arrays profile's kernels use, with as many
OpenMP threads as profile uses Python threads. Rounds alternate C and NumPy; each round reports the
best of ``--repeats`` runs per kernel (STREAM's rule: best time after the first). The figure is the
ratio of the best NumPy triad to the best C triad; the goal is >= 0.85. Machines here are noisy:
only interleaved ratios mean anything, absolute GB/s swing from run to run.

    PYTHONPATH=collections .venv/bin/python benchmarks/memory_vs_c_stream.py [--rounds 6] [--repeats 5] [--threads N] [--array-mib M]
"""

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy

from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import memory
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.cpu import usable_cpus

C_SOURCE = r"""
#include <stddef.h>
#include <omp.h>
void set_threads(int n) { omp_set_num_threads(n); }
void stream_copy(double *restrict a, const double *restrict b, size_t n) {
#pragma omp parallel for
    for (size_t j = 0; j < n; j++) a[j] = b[j];
}
void stream_triad(double *restrict a, const double *restrict b, const double *restrict c, double q, size_t n) {
#pragma omp parallel for
    for (size_t j = 0; j < n; j++) a[j] = b[j] + q * c[j];
}
"""


def build(workdir):
    source = os.path.join(workdir, "stream_kernels.c")
    library = os.path.join(workdir, "stream_kernels.so")
    with open(source, "w") as handle:
        handle.write(C_SOURCE)
    subprocess.run(["gcc", "-O3", "-fopenmp", "-shared", "-fPIC", "-o", library, source], check=True)
    return ctypes.CDLL(library)


def best_gbps(run, nbytes, repeats):
    run()  # STREAM discards the first iteration
    best = None
    for _repeat in range(repeats):
        start = time.perf_counter()
        run()
        rate = nbytes / (time.perf_counter() - start) / 1e9
        best = rate if best is None else max(best, rate)
    return best


def measure(threads, array_mib, rounds, repeats):
    size = array_mib * 1024 * 1024 if array_mib else memory.choose_array_bytes(
        memory.last_level_cache_bytes(), memory.available_memory_bytes())[0]
    kernels = memory.StreamKernels(numpy, size // 8, threads, memory.CHUNK_ELEMENTS * max(1, threads // 16))
    team = memory.ThreadTeam(kernels, threads) if threads > 1 else None
    with tempfile.TemporaryDirectory() as workdir:
        lib = build(workdir)
        lib.set_threads(threads)
        pointer = ctypes.POINTER(ctypes.c_double)
        lib.stream_triad.argtypes = [pointer, pointer, pointer, ctypes.c_double, ctypes.c_size_t]
        lib.stream_copy.argtypes = [pointer, pointer, ctypes.c_size_t]
        a, b, c = (array.ctypes.data_as(pointer) for array in (kernels.a, kernels.b, kernels.c))
        n = kernels.elements

        def numpy_kernel(name):
            if team is not None:
                return lambda: team.run(name)
            return lambda: getattr(kernels, name)(0)

        runs = {
            "c_triad": lambda: lib.stream_triad(a, b, c, memory.TRIAD_SCALAR, n),
            "numpy_triad": numpy_kernel("triad"),
            "c_copy": lambda: lib.stream_copy(a, b, n),
            "numpy_copy": numpy_kernel("copy"),
        }
        per_round = []
        for _round in range(rounds):
            figures = {}
            for name, run in runs.items():
                figures[name] = best_gbps(run, kernels.bytes_moved(name.split("_")[1]), repeats)
            per_round.append(figures)
    if team is not None:
        team.close()
    best = dict((name, max(r[name] for r in per_round)) for name in runs)
    return {
        "threads": threads,
        "array_mib": size // (1024 * 1024),
        "best_gbps": dict((k, round(v, 2)) for k, v in best.items()),
        "triad_ratio_of_bests": round(best["numpy_triad"] / best["c_triad"], 3),
        "triad_ratio_median_of_rounds": round(statistics.median(r["numpy_triad"] / r["c_triad"] for r in per_round), 3),
        "copy_ratio_of_bests": round(best["numpy_copy"] / best["c_copy"], 3),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=usable_cpus())
    parser.add_argument("--array-mib", type=int, default=None)
    args = parser.parse_args()
    result = {"all_threads": measure(args.threads, args.array_mib, args.rounds, args.repeats)}
    if args.threads > 1:
        result["one_thread"] = measure(1, args.array_mib, args.rounds, args.repeats)
    result["goal"] = "all_threads.triad_ratio_of_bests >= 0.85"
    result["met"] = result["all_threads"]["triad_ratio_of_bests"] >= 0.85
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

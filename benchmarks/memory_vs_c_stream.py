# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NumPy STREAM triad (profile's and doctor's) against the best C STREAM triad over 1..N threads, interleaved.

The C kernels are STREAM's copy and triad loops (``#pragma omp parallel for``), built here with
``gcc -O3 -fopenmp`` and called through ctypes on the very arrays the NumPy kernels use. Each round
runs the C triad at every thread count 1..N and the NumPy triads (both kernels) at every count 1..N
(the same sweep _host.measure.stream.best_over_threads does), each the best of ``--repeats`` runs, the runners alternating run by run
(STREAM's rule: best time after the first). Run it with OPENBLAS_NUM_THREADS=1 to measure what doctor's
worker runs (profile runs in its own process, with the BLAS threads NumPy loaded with). The figure is the ratio of the round's best NumPy triad to the
round's best C triad, whatever the thread counts; the goal is a median over rounds >= 0.85. Machines
here are noisy: only interleaved ratios mean anything, absolute GB/s swing from run to run.

    PYTHONPATH=collections .venv/bin/python benchmarks/memory_vs_c_stream.py [--rounds 6] [--repeats 8] [--max-threads N] [--array-mib M]
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

from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import membench, stream

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


def timed_gbps(run, nbytes):
    start = time.perf_counter()
    run()
    return nbytes / (time.perf_counter() - start) / 1e9


def numpy_team(kernels, threads):
    """A callable running a named NumPy kernel on ``threads`` threads (the arrays re-split for that count), and its team."""
    kernels.split(threads, stream.CHUNK_ELEMENTS * max(1, threads // 16))
    if threads == 1:
        return (lambda name: getattr(kernels, name)(0)), None
    team = stream.ThreadTeam(kernels, threads)
    return team.run, team


def one_round(lib, kernels, pointers, counts, repeats):
    """Best GB/s of every runner; the runners of one thread count alternate run by run (the load hits them alike)."""
    a, b, c = pointers
    n = kernels.elements
    figures = {}
    for threads in counts:
        lib.set_threads(threads)
        run, team = numpy_team(kernels, threads)
        runners = {
            "c_triad_%d" % threads: (lambda: lib.stream_triad(a, b, c, stream.TRIAD_SCALAR, n), "triad"),
            "c_copy_%d" % threads: (lambda: lib.stream_copy(a, b, n), "copy"),
            "numpy_copy_%d" % threads: ((lambda run=run: run("copy")), "copy"),
        }
        for name in stream.TRIADS:
            runners["numpy_%s_%d" % (name, threads)] = ((lambda name=name, run=run: run(name)), name)
        try:
            for call, _kind in runners.values():
                call()  # STREAM discards the first iteration
            for _repeat in range(repeats):
                for key, (call, kind) in runners.items():
                    figures[key] = max(figures.get(key, 0.0), timed_gbps(call, kernels.bytes_moved(kind)))
        finally:
            if team is not None:
                team.close()
    return figures


def measure(counts, array_mib, rounds, repeats):
    size = array_mib * 1024 * 1024 if array_mib else membench.choose_array_bytes(
        membench.last_level_cache_bytes(), membench.available_memory_bytes())[0]
    kernels = stream.StreamKernels(numpy, size // 8, max(counts))
    with tempfile.TemporaryDirectory() as workdir:
        lib = build(workdir)
        pointer = ctypes.POINTER(ctypes.c_double)
        lib.stream_triad.argtypes = [pointer, pointer, pointer, ctypes.c_double, ctypes.c_size_t]
        lib.stream_copy.argtypes = [pointer, pointer, ctypes.c_size_t]
        pointers = tuple(array.ctypes.data_as(pointer) for array in (kernels.a, kernels.b, kernels.c))
        per_round = [one_round(lib, kernels, pointers, counts, repeats) for _round in range(rounds)]

    def best_of(round_figures, prefix):
        key = max((k for k in round_figures if k.startswith(prefix)), key=lambda k: round_figures[k])
        return round_figures[key], key[len(prefix):]

    ratios, copy_ratios, rows = [], [], []
    for figures in per_round:
        (c_best, c_which), (np_best, np_which) = best_of(figures, "c_triad_"), best_of(figures, "numpy_triad")
        ratios.append(np_best / c_best)
        copy_ratios.append(best_of(figures, "numpy_copy_")[0] / best_of(figures, "c_copy_")[0])
        rows.append({"c_best_gbps": round(c_best, 2), "c_threads": int(c_which), "numpy_best_gbps": round(np_best, 2),
                     "numpy_kernel_threads": "triad" + np_which, "ratio": round(np_best / c_best, 3)})
    return {
        "thread_counts": counts,
        "array_mib": size // (1024 * 1024),
        "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        "rounds": rows,
        "best_gbps": dict((k, round(max(r[k] for r in per_round), 2)) for k in sorted(per_round[0])),
        "triad_ratio_to_best_c_median": round(statistics.median(ratios), 3),
        "triad_ratio_to_best_c_spread": [round(min(ratios), 3), round(max(ratios), 3)],
        "copy_ratio_to_best_c_median": round(statistics.median(copy_ratios), 3),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--max-threads", type=int, default=membench.usable_cpus())
    parser.add_argument("--array-mib", type=int, default=None)
    args = parser.parse_args()
    result = measure(stream.thread_candidates(args.max_threads), args.array_mib, args.rounds, args.repeats)
    result["goal"] = "triad_ratio_to_best_c_median >= 0.85 (best NumPy over 1..N threads / best C over 1..N threads)"
    result["met"] = result["triad_ratio_to_best_c_median"] >= 0.85
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""profile's memory benchmark, and the NumPy STREAM triad, against the best C STREAM triad over 1..N threads.

The reference C kernels are STREAM's copy and triad loops (``#pragma omp parallel for``), built here with
``gcc -O3 -fopenmp`` and called through ctypes on the very arrays the NumPy kernels use. Each round:

1. the reference C triad at every thread count 1..N and the NumPy triads (both kernels, the sweep
   _host.measure.stream.best_over_threads does) at every count, each the best of ``--repeats`` runs, the
   runners alternating run by run (STREAM's rule: best time after the first);
2. profile's memory benchmark as profile runs it (_profile.bench.memory.run_memory, method auto: the
   compiled STREAM program where a compiler exists, else the NumPy worker);
3. the reference C sweep again: profile's figure is compared with the best of both sweeps (the goal's ratio is
   to the best), the NumPy kernels with the C runs interleaved with them.

Two ratios per round, medians over rounds printed: profile's triad / best C (the goal: >= 0.85) and the NumPy
kernels' best triad / best C (what hosts without a compiler get). Run it with OPENBLAS_NUM_THREADS=1 to measure
what the NumPy worker runs. Machines here are noisy: only interleaved ratios mean anything, absolute GB/s swing
from run to run.

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
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import memory

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


def one_round(lib, kernels, pointers, counts, repeats, runners_of):
    """Best GB/s of every runner; the runners of one thread count alternate run by run (the load hits them alike)."""
    figures = {}
    for threads in counts:
        lib.set_threads(threads)
        run, team = numpy_team(kernels, threads)
        runners = runners_of(threads, run)
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
        a, b, c = tuple(array.ctypes.data_as(pointer) for array in (kernels.a, kernels.b, kernels.c))
        n = kernels.elements

        def c_runners(threads, _run):
            return {"c_triad_%d" % threads: (lambda: lib.stream_triad(a, b, c, stream.TRIAD_SCALAR, n), "triad"),
                    "c_copy_%d" % threads: (lambda: lib.stream_copy(a, b, n), "copy")}

        def c_and_numpy_runners(threads, run):
            runners = c_runners(threads, run)
            runners["numpy_copy_%d" % threads] = ((lambda: run("copy")), "copy")
            for name in stream.TRIADS:
                runners["numpy_%s_%d" % (name, threads)] = ((lambda name=name: run(name)), name)
            return runners

        per_round, profiles = [], []
        for _round in range(rounds):
            figures = one_round(lib, kernels, (a, b, c), counts, repeats, c_and_numpy_runners)
            profiles.append(memory.run_memory(0.2, 1.0, array_mib=size // (1024 * 1024)))
            again = one_round(lib, kernels, (a, b, c), counts, repeats, c_runners)
            per_round.append((figures, dict(figures, **dict((key, max(value, figures[key])) for key, value in again.items()))))

    def best_of(round_figures, prefix):
        key = max((k for k in round_figures if k.startswith(prefix)), key=lambda k: round_figures[k])
        return round_figures[key], key[len(prefix):]

    ratios, profile_ratios, copy_ratios, rows = [], [], [], []
    for (figures, both), profile in zip(per_round, profiles):
        # NumPy against the C runs interleaved with it; profile (run between the sweeps) against the best of both.
        (c_near, _which), (np_best, np_which) = best_of(figures, "c_triad_"), best_of(figures, "numpy_triad")
        c_best, c_which = best_of(both, "c_triad_")
        ratios.append(np_best / c_near)
        profile_ratios.append(profile["triad_gbps"] / c_best)
        copy_ratios.append(best_of(figures, "numpy_copy_")[0] / best_of(figures, "c_copy_")[0])
        rows.append({"c_best_gbps": round(c_best, 2), "c_threads": int(c_which),
                     "profile_gbps": profile["triad_gbps"], "profile_method": profile["method"],
                     "profile_threads": profile["threads"], "profile_ratio": round(profile_ratios[-1], 3),
                     "numpy_best_gbps": round(np_best, 2), "numpy_kernel_threads": "triad" + np_which,
                     "numpy_ratio": round(ratios[-1], 3)})
    return {
        "thread_counts": counts,
        "array_mib": size // (1024 * 1024),
        "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        "rounds": rows,
        "best_gbps": dict((k, round(max(r[1][k] for r in per_round), 2)) for k in sorted(per_round[0][1])),
        "profile_method": profiles[-1]["method"],
        "profile_triad_ratio_to_best_c_median": round(statistics.median(profile_ratios), 3),
        "profile_triad_ratio_to_best_c_spread": [round(min(profile_ratios), 3), round(max(profile_ratios), 3)],
        "numpy_triad_ratio_to_best_c_median": round(statistics.median(ratios), 3),
        "numpy_triad_ratio_to_best_c_spread": [round(min(ratios), 3), round(max(ratios), 3)],
        "numpy_copy_ratio_to_best_c_median": round(statistics.median(copy_ratios), 3),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--max-threads", type=int, default=membench.usable_cpus())
    parser.add_argument("--array-mib", type=int, default=None)
    args = parser.parse_args()
    result = measure(stream.thread_candidates(args.max_threads), args.array_mib, args.rounds, args.repeats)
    result["goal"] = "profile_triad_ratio_to_best_c_median >= 0.85 (profile's memory triad / best C over 1..N threads)"
    result["met"] = result["profile_triad_ratio_to_best_c_median"] >= 0.85
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Host memory bandwidth for every feature: STREAM array sizing, the NumPy triad in a worker, and the same
machine's compiled-C STREAM triad as a reference.

Sizing (STREAM's rule): each array at least 4x the last-level caches, capped so that the three arrays take at
most half the available memory. The C program is STREAM's copy and triad loops (``a[j] = b[j] + q*c[j]``,
OpenMP when the compiler has it), compiled with ``-O3`` in a temporary directory under a deadline and run with
1..N threads (OMP_NUM_THREADS), the best kept: what this machine's memory delivers to compiled code. It is
profile's memory benchmark where a compiler exists (c_stream) and doctor's reference for the NumPy triad
(c_triad_reference).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import glob
import json
import os
import shutil
import tempfile
import time
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError, find_binary, run
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text_or_none
from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import stream
from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import worker as _worker
from ansible_collections.continuum.hydra.plugins.module_utils._host.procfs import meminfo_kib

MIB = 1024 * 1024
MIN_ARRAY_BYTES = 64 * MIB
FALLBACK_LLC_BYTES = 32 * MIB
COMPILERS = ("cc", "gcc", "clang")
# One BLAS thread in the triad worker: the worker's own threads split the arrays (stream.triad_matmul calls BLAS).
BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
C_REPEATS = 10  # STREAM's NTIMES: the best of these after a discarded first run

C_SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#define MAX_REPEATS 100000
#define HUGE_PAGE (2UL << 20)
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static double *array(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, n * sizeof(double))) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, n * sizeof(double), MADV_HUGEPAGE); /* as NumPy does for large arrays */
#endif
    return p;
}
static void print_rates(const char *name, const double *rates, int count) {
    printf("\"%s\": [", name);
    for (int k = 0; k < count; k++) printf(k ? ", %.3f" : "%.3f", rates[k] / 1e9);
    printf("]");
}
/* argv: elements warmup_s duration_s min_repeats */
int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: %s elements warmup_s duration_s min_repeats\n", argv[0]); return 2; }
    size_t n = (size_t)strtoull(argv[1], NULL, 10), j;
    double warmup_s = atof(argv[2]), duration_s = atof(argv[3]), q = 3.0, start;
    int min_repeats = atoi(argv[4]), count = 0, threads = 1;
    double *a = array(n), *b = array(n), *c = array(n);
    static double copy_rates[MAX_REPEATS], triad_rates[MAX_REPEATS];
    if (!a || !b || !c) { fprintf(stderr, "cannot allocate 3 arrays of %zu MiB\n", n * sizeof(double) >> 20); return 2; }
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
#pragma omp parallel for
    for (j = 0; j < n; j++) { a[j] = 0.0; b[j] = 1.0; c[j] = 2.0; }
    /* Warm up for warmup_s (at least one run: STREAM discards the first), then measure for duration_s. */
    start = now();
    for (int warm = 1; count < MAX_REPEATS;) {
        double t0 = now(), t1, t2;
#pragma omp parallel for
        for (j = 0; j < n; j++) a[j] = b[j];
        t1 = now();
#pragma omp parallel for
        for (j = 0; j < n; j++) a[j] = b[j] + q * c[j];
        t2 = now();
        if (warm) {
            warm = t2 - start < warmup_s;
            start = warm ? start : t2;
            continue;
        }
        copy_rates[count] = 16.0 * n / (t1 - t0);
        triad_rates[count++] = 24.0 * n / (t2 - t1);
        if (count >= min_repeats && t2 - start >= duration_s) break;
    }
    if (a[n / 2] != 1.0 + q * 2.0) { fprintf(stderr, "triad check failed\n"); return 3; }
    printf("{\"threads\": %d, ", threads);
    print_rates("copy_gbps_repeats", copy_rates, count);
    printf(", ");
    print_rates("triad_gbps_repeats", triad_rates, count);
    printf("}\n");
    return 0;
}
"""


def parse_cache_size(text: str) -> int:
    """ "32768K" / "1M" / "512" (bytes) -> bytes."""
    text = text.strip().upper()
    units = {"K": 1024, "M": MIB, "G": 1024 * MIB}
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def last_level_cache_bytes(root: str = "/") -> Optional[int]:
    """Sum of the distinct caches of the highest level (one L3 per CCX / socket), None when unreadable."""
    caches: dict[tuple[int, str], int] = {}
    for index_dir in glob.glob(os.path.join(root, "sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*")):
        texts = [read_text_or_none(os.path.join(index_dir, name)) for name in ("level", "type", "size", "shared_cpu_list")]
        if any(text is None for text in texts):
            continue
        level_text, kind_text, size_text, shared_text = (text or "" for text in texts)
        try:
            level, size = int(level_text), parse_cache_size(size_text)
        except ValueError:
            continue
        kind, shared = kind_text.strip(), shared_text.strip()
        if kind != "Instruction":
            caches[(level, shared)] = size
    if not caches:
        return None
    top = max(level for level, _shared in caches)
    return sum(size for (level, _shared), size in caches.items() if level == top)


def available_memory_bytes(root: str = "/") -> Optional[int]:
    kib = meminfo_kib(read_text_or_none(os.path.join(root, "proc/meminfo")), "MemAvailable")
    return kib * 1024 if kib is not None else None


def choose_array_bytes(llc_bytes: Optional[int], available_bytes: Optional[int], requested_bytes: Optional[int] = None) -> tuple[int, list[str]]:
    """Bytes per array and a note when the STREAM size rule cannot be kept."""
    rule = max(4 * (llc_bytes or FALLBACK_LLC_BYTES), MIN_ARRAY_BYTES)
    size = requested_bytes or rule
    notes: list[str] = []
    if available_bytes and 3 * size > available_bytes // 2:
        size = max(available_bytes // 6, MIB)
        notes.append("arrays capped to %d MiB each to leave memory free" % (size // MIB))
    if size < 4 * (llc_bytes or FALLBACK_LLC_BYTES):
        notes.append("arrays of %d MiB are below 4x the last-level cache (%d MiB): figures include cache hits"
                     % (size // MIB, (llc_bytes or FALLBACK_LLC_BYTES) // MIB))
    return size - size % 8, notes


def usable_cpus() -> int:
    """CPUs this process may run on (affinity / cpuset), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def numpy_triad(array_bytes: int, threads: list[int], warmup_s: float, duration_s: float, timeout_s: float,
                python: Optional[str] = None, progress: Optional[_worker.Progress] = None) -> dict[str, Any]:
    """The NumPy STREAM worker's answer (best over ``threads``); status "absent" without NumPy.

    WorkerError when it crashes or runs past ``timeout_s`` (killed with its process group).
    """
    args = {"array_bytes": array_bytes, "threads": threads, "warmup_s": warmup_s, "duration_s": duration_s}
    env = dict((name, "1") for name in BLAS_THREAD_VARIABLES)
    return _worker.run_worker(stream, args, timeout_s, "NumPy STREAM triad", python=python, env=env, progress=progress)


def find_compiler() -> Optional[str]:
    return next((path for path in (find_binary(name) for name in COMPILERS) if path), None)


def compile_c_stream(workdir: str, timeout_s: float, compiler: Optional[str] = None) -> tuple[str, bool]:
    """Build the C STREAM program in workdir: (executable path, whether it has OpenMP).

    ProbeAbsent without a compiler; ProbeError when neither an OpenMP nor a plain build compiles.
    """
    compiler = compiler or find_compiler()
    if compiler is None:
        raise ProbeAbsent("no C compiler (%s) on PATH" % ", ".join(COMPILERS))
    source = os.path.join(workdir, "hydra_stream.c")
    executable = os.path.join(workdir, "hydra_stream")
    with open(source, "w") as handle:
        handle.write(C_SOURCE)
    end = time.monotonic() + timeout_s
    last = ""
    for flags, openmp in ((["-O3", "-fopenmp"], True), (["-O3"], False)):
        rc, _stdout, stderr = run([compiler] + flags + ["-o", executable, source], max(0.001, end - time.monotonic()))
        if rc == 0:
            return executable, openmp
        last = (stderr.strip().splitlines() or ["no error output"])[-1]
    raise ProbeError("%s cannot compile the C STREAM triad: %s" % (compiler, last[:200]))


def _c_run(executable: str, elements: int, count: int, warmup_s: float, duration_s: float, min_repeats: int,
           timeout_s: float) -> dict[str, list[float]]:
    """One run of the built program on ``count`` threads: its copy and triad GB/s per repeat."""
    argv = [executable, str(elements), repr(warmup_s), repr(duration_s), str(min_repeats)]
    rc, stdout, stderr = run(argv, max(0.001, timeout_s), env={"OMP_NUM_THREADS": str(count)})
    if rc != 0:
        tail = (stderr.strip().splitlines() or ["no error output"])[-1]
        raise ProbeError("C STREAM triad (%d threads) exited with rc %d: %s" % (count, rc, tail[:200]))
    try:
        answer = json.loads(stdout.strip().splitlines()[-1])
        rates = {"copy": [float(rate) for rate in answer["copy_gbps_repeats"]],
                 "triad": [float(rate) for rate in answer["triad_gbps_repeats"]]}
    except (ValueError, IndexError, KeyError, TypeError):
        raise ProbeError("C STREAM triad (%d threads) printed %r" % (count, stdout[:200])) from None
    if not rates["triad"] or not all(rate > 0 for rate in rates["triad"] + rates["copy"]):
        raise ProbeError("C STREAM triad (%d threads) measured no positive rate: %r" % (count, stdout[:200]))
    return rates


def c_stream(array_bytes: int, threads: list[int], warmup_s: float, duration_s: float, timeout_s: float,
             compiler: Optional[str] = None, min_repeats: int = 3, progress: Optional[_worker.Progress] = None,
             require_openmp: bool = False) -> dict[str, Any]:
    """The compiled-C STREAM copy and triad, every count of ``threads`` (1..N) measured, the best triad's run kept.

    warmup_s and duration_s are split over the thread counts, as the NumPy sweep does; everything, compiling
    included, runs within ``timeout_s``. ProbeAbsent without a compiler, or without OpenMP when ``require_openmp``
    (the program would run on one thread only); ProbeError when it cannot compile or a run fails or runs past the
    deadline.
    """
    end = time.monotonic() + timeout_s
    compiler = compiler or find_compiler()
    workdir = tempfile.mkdtemp(prefix="hydra-stream-")
    try:
        executable, openmp = compile_c_stream(workdir, timeout_s, compiler)
        if require_openmp and not openmp:
            raise ProbeAbsent("%s has no OpenMP: compiled STREAM would run on one thread" % compiler)
        counts = threads if openmp else [1]
        share = float(len(counts))
        runs: dict[int, dict[str, list[float]]] = {}
        for done, count in enumerate(counts):
            if progress is not None:
                progress("memory (C STREAM, %d threads)" % count, done, len(counts), "thread counts")
            runs[count] = _c_run(executable, array_bytes // 8, count, warmup_s / share, duration_s / share, min_repeats,
                                 end - time.monotonic())
        best = max(runs, key=lambda count: max(runs[count]["triad"]))
        return {"method": "c_stream", "threads": best, "openmp": openmp, "compiler": compiler,
                "triad_gbps": max(runs[best]["triad"]), "copy_gbps": max(runs[best]["copy"]), "rates": runs[best],
                "triad_gbps_by_threads": dict((str(count), max(rates["triad"])) for count, rates in runs.items())}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def c_triad_reference(array_bytes: int, threads: list[int], timeout_s: float, compiler: Optional[str] = None,
                      repeats: int = C_REPEATS) -> dict[str, Any]:
    """The compiled-C STREAM triad on this machine, best over ``threads`` (1..N), within ``timeout_s`` in all:
    STREAM's own run (``repeats`` after a discarded first) for every count. Errors as c_stream's."""
    found = c_stream(array_bytes, threads, 0.0, 0.0, timeout_s, compiler, min_repeats=repeats)
    return dict((key, found[key]) for key in ("triad_gbps", "copy_gbps", "threads", "openmp", "triad_gbps_by_threads", "compiler"))

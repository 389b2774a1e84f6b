# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Host memory bandwidth for every feature: STREAM array sizing, the NumPy triad in a worker, and the same
machine's compiled-C STREAM triad as a reference.

Sizing (STREAM's rule): each array at least 4x the last-level caches, capped so that the three arrays take at
most half the available memory. The C reference is STREAM's triad loop (``a[j] = b[j] + q*c[j]``, OpenMP when
the compiler has it), compiled with ``-O3`` in a temporary directory under a deadline and run with 1..N threads
(OMP_NUM_THREADS), the best kept: what this machine's memory delivers to compiled code.

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
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
    size_t n = (size_t)strtoull(argv[1], NULL, 10), j;
    int repeats = atoi(argv[2]), k, threads = 1;
    double q = 3.0, best_triad = 0.0, best_copy = 0.0, *a, *b, *c;
    if (posix_memalign((void **)&a, 64, n * sizeof(double)) || posix_memalign((void **)&b, 64, n * sizeof(double))
        || posix_memalign((void **)&c, 64, n * sizeof(double))) { fprintf(stderr, "cannot allocate\n"); return 2; }
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
#pragma omp parallel for
    for (j = 0; j < n; j++) { a[j] = 0.0; b[j] = 1.0; c[j] = 2.0; }
    for (k = 0; k <= repeats; k++) {
        double t0 = now(), t1, t2;
#pragma omp parallel for
        for (j = 0; j < n; j++) a[j] = b[j];
        t1 = now();
#pragma omp parallel for
        for (j = 0; j < n; j++) a[j] = b[j] + q * c[j];
        t2 = now();
        if (k > 0) {
            if (16.0 * n / (t1 - t0) > best_copy) best_copy = 16.0 * n / (t1 - t0);
            if (24.0 * n / (t2 - t1) > best_triad) best_triad = 24.0 * n / (t2 - t1);
        }
    }
    if (a[n / 2] != 1.0 + q * 2.0) { fprintf(stderr, "triad check failed\n"); return 3; }
    printf("{\"threads\": %d, \"copy_gbps\": %.3f, \"triad_gbps\": %.3f}\n", threads, best_copy / 1e9, best_triad / 1e9);
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


def c_triad_reference(array_bytes: int, threads: list[int], timeout_s: float, compiler: Optional[str] = None,
                      repeats: int = C_REPEATS) -> dict[str, Any]:
    """The compiled-C STREAM triad on this machine, best over ``threads`` (1..N), within ``timeout_s`` in all.

    ProbeAbsent without a compiler, ProbeError when it cannot compile or a run fails or times out.
    """
    end = time.monotonic() + timeout_s
    workdir = tempfile.mkdtemp(prefix="hydra-stream-")
    try:
        executable, openmp = compile_c_stream(workdir, timeout_s, compiler)
        counts = threads if openmp else [1]
        by_threads: dict[str, float] = {}
        best: Optional[dict[str, Any]] = None
        for count in counts:
            argv = [executable, str(array_bytes // 8), str(repeats)]
            rc, stdout, stderr = run(argv, max(0.001, end - time.monotonic()), env={"OMP_NUM_THREADS": str(count)})
            if rc != 0:
                tail = (stderr.strip().splitlines() or ["no error output"])[-1]
                raise ProbeError("C STREAM triad (%d threads) exited with rc %d: %s" % (count, rc, tail[:200]))
            try:
                answer = json.loads(stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                raise ProbeError("C STREAM triad (%d threads) printed %r" % (count, stdout[:200])) from None
            by_threads[str(count)] = answer["triad_gbps"]
            if best is None or answer["triad_gbps"] > best["triad_gbps"]:
                best = answer
        return {"triad_gbps": (best or {}).get("triad_gbps"), "copy_gbps": (best or {}).get("copy_gbps"),
                "threads": (best or {}).get("threads"), "openmp": openmp, "triad_gbps_by_threads": by_threads,
                "compiler": compiler or find_compiler()}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

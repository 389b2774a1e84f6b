# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Memory benchmark: host memory bandwidth in STREAM terms (copy and triad), on every usable CPU.

STREAM rules kept: each array is at least 4x the last-level caches; copy
counts 16 bytes and triad (a = b + q*c) 24 bytes per element (write-allocate
traffic not counted); the best repeat after a warmup is reported, with the
mean and the coefficient of variation beside it. Without a thread count
given, every count of stream.thread_candidates (1..N) is measured and the
best triad kept, as STREAM users run 1..N OpenMP threads.

Three instruments, the first that runs is used (``method``; a host's
figures are compared with other hosts' of the same method only):

- ``c_stream``: STREAM's own loops compiled here (_host.measure.membench,
  the program doctor's system.memory_bandwidth builds as its reference),
  wherever a C compiler exists.
- ``numpy_blocked``: NumPy blocked kernels (_host.measure.stream) in a worker
  process with one BLAS thread. NumPy cannot fuse the triad into one pass
  over memory, so where one core's outstanding misses bound the bandwidth (a
  few cores) it reaches 0.7-0.9x of the C triad; on many cores, where the
  DIMMs are the bound, about the same figure.
- ``stdlib_memoryview_copy``: without NumPy, bytearrays copied through
  memoryviews on one thread, copy only.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import time
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import membench, stream
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.stats import BenchError, Progress, cv, mean, outcome, rounded
from ansible_collections.continuum.hydra.plugins.module_utils._status import BENCH_FALLBACK, BENCH_OK

MIB = membench.MIB
AUTO, C_STREAM, NUMPY_BLOCKED = "auto", "c_stream", "numpy_blocked"
METHODS = (AUTO, C_STREAM, NUMPY_BLOCKED)  # profile's benchmark_options.memory.method
# The kernels under their old names here, for benchmarks/sampler_overhead.py (new code imports _host.measure.stream).
StreamKernels = stream.StreamKernels
ThreadTeam = stream.ThreadTeam
MAX_CV = 0.15  # above this the repeats disagree too much for the best to mean anything
_SLACK_S = 60.0  # worker start-up, allocation and the last repeats on top of 3x (warmup + duration)


def default_timeout_s(warmup_s: float, duration_s: float) -> float:
    """The timeout of each way of measuring (compiled C STREAM, then the NumPy worker)."""
    return 3 * (warmup_s + duration_s) + _SLACK_S


def run_memory(warmup_s: float, duration_s: float, array_mib: Optional[int] = None, threads: Optional[int] = None,
               progress: Optional[Progress] = None, root: str = "/", numpy: Any = None, method: str = AUTO) -> dict[str, Any]:
    """STREAM copy/triad GB/s (best of the repeats after warmup) by ``method`` (METHODS), AUTO: the first that runs."""
    llc = membench.last_level_cache_bytes(root)
    size, notes = membench.choose_array_bytes(llc, membench.available_memory_bytes(root), array_mib * MIB if array_mib else None)
    if llc is None:
        notes.append("last-level cache size unreadable: assumed %d MiB" % (membench.FALLBACK_LLC_BYTES // MIB))
    candidates = [threads] if threads else stream.thread_candidates(membench.usable_cpus())
    timeout_s = default_timeout_s(warmup_s, duration_s)
    common = dict(array_bytes=size, llc_bytes=llc, warmup_s=warmup_s, duration_s=duration_s, notes=notes)
    if numpy is not None:
        # NumPy handed in (tests): measured in this process, with the BLAS threads it was loaded with.
        try:
            found = stream.best_over_threads(numpy, size // 8, candidates, warmup_s, duration_s, progress)
        except MemoryError:
            raise BenchError("cannot allocate 3 arrays of %d MiB" % (size // MIB)) from None
        except stream.StreamError as exc:
            raise BenchError(str(exc)) from None
        return _numpy_outcome(found["rates"], found["threads"], found["kernel"], found["triad_gbps_by_threads"], common)
    if method in (AUTO, C_STREAM):
        try:
            # AUTO wants every CPU streaming: a build without OpenMP (one thread) leaves it to NumPy's threads.
            found = membench.c_stream(size, candidates, warmup_s, duration_s, timeout_s, progress=progress,
                                      require_openmp=method == AUTO and max(candidates) > 1)
        except (ProbeAbsent, ProbeError) as exc:
            if method == C_STREAM:
                raise BenchError("compiled C STREAM: %s" % exc) from None
            notes.append("compiled C STREAM not run (%s): NumPy kernels instead" % exc)
        else:
            if not found["openmp"] and max(candidates) > 1:
                notes.append("%s has no OpenMP: the C triad ran on one thread of %d" % (found["compiler"], max(candidates)))
            return _outcome(C_STREAM, "STREAM copy/triad, compiled C (%s, %s) on %d threads"
                            % (os.path.basename(found["compiler"] or "cc"), "OpenMP" if found["openmp"] else "no OpenMP",
                               found["threads"]),
                            found["rates"], found["threads"], found["triad_gbps_by_threads"], common,
                            compiler=found["compiler"], openmp=found["openmp"])
    try:
        import numpy  # noqa: F401  # pylint: disable=import-outside-toplevel,redefined-outer-name,unused-import
    except ImportError as exc:
        if method == NUMPY_BLOCKED:
            raise BenchError("NumPy is not importable: %s" % exc) from None
        notes.append("NumPy is not importable (%s): stdlib memoryview copy, no triad" % exc)
        return run_memory_stdlib(warmup_s, duration_s, size, llc, notes, progress)
    # The worker doctor's system.memory_bandwidth runs (one BLAS thread: ours are the threads).
    answer = membench.numpy_triad(size, candidates, warmup_s, duration_s, timeout_s, progress=progress)
    if answer.get("status") != BENCH_OK:
        raise BenchError("memory benchmark worker: %s" % answer.get("reason", answer))
    rates = {"triad": answer["triad_gbps_repeats"], "copy": answer["copy_gbps_repeats"]}
    return _numpy_outcome(rates, answer["threads"], answer["kernel"], answer["triad_gbps_by_threads"], common)


def _numpy_outcome(rates: dict[str, list[float]], threads: int, kernel: str, by_threads: dict[str, float],
                   common: dict[str, Any]) -> dict[str, Any]:
    return _outcome(NUMPY_BLOCKED, "STREAM copy/triad, NumPy blocked kernels on %d threads (triad: %s)" % (threads, kernel),
                    rates, threads, by_threads, common, triad_kernel=kernel)


def _outcome(method: str, message: str, rates: dict[str, list[float]], threads: int, by_threads: dict[str, float],
             common: dict[str, Any], **extra: Any) -> dict[str, Any]:
    triad_cv = cv(rates["triad"])
    if triad_cv is not None and triad_cv > MAX_CV:
        common["notes"].append("triad repeats vary by %.0f%% (CV above %.0f%%): the machine was busy, treat the figures as noisy"
                               % (100 * triad_cv, 100 * MAX_CV))
    return outcome(
        BENCH_OK, message,
        method=method,
        copy_gbps=rounded(max(rates["copy"])),
        triad_gbps=rounded(max(rates["triad"])),
        copy_gbps_mean=rounded(mean(rates["copy"])),
        triad_gbps_mean=rounded(mean(rates["triad"])),
        triad_cv=rounded(triad_cv, 4),
        repeats=len(rates["triad"]),
        threads=threads,
        triad_gbps_by_threads=dict((count, rounded(rate)) for count, rate in by_threads.items()),
        **dict(common, **extra)
    )


def run_memory_stdlib(warmup_s: float, duration_s: float, size: int, llc: Optional[int], notes: list[str],
                      progress: Optional[Progress] = None) -> dict[str, Any]:
    source = bytearray(os.urandom(MIB)) * (size // MIB)
    target = bytearray(len(source))
    src, dst = memoryview(source), memoryview(target)

    def run(_kernel: str) -> float:
        start = time.perf_counter()
        dst[:] = src
        return time.perf_counter() - start
    rates = stream.measure(run, lambda _kernel: 2 * len(source), warmup_s, duration_s, progress, kernels=("copy",))["copy"]
    return outcome(
        BENCH_FALLBACK, "stdlib memoryview copy (NumPy absent): copy only, one thread",
        method="stdlib_memoryview_copy",
        copy_gbps=rounded(max(rates)),
        triad_gbps=None,
        copy_gbps_mean=rounded(mean(rates)),
        triad_gbps_mean=None,
        triad_cv=None,
        copy_cv=rounded(cv(rates), 4),
        repeats=len(rates),
        threads=1,
        array_bytes=len(source),
        llc_bytes=llc,
        warmup_s=warmup_s,
        duration_s=duration_s,
        notes=notes,
    )

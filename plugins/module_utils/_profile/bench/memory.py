# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Memory benchmark: host memory bandwidth in STREAM terms (copy and triad), on every usable CPU.

STREAM rules kept: each array is at least 4x the last-level caches; copy
counts 16 bytes and triad (a = b + q*c) 24 bytes per element (write-allocate
traffic not counted); the best repeat after a warmup is reported, with the
mean and the coefficient of variation beside it.

NumPy is written without temporaries: each thread owns a contiguous slice of
the arrays and walks it in cache-sized chunks with ``out=`` ufuncs, so the
intermediate q*c lives in cache (a naive ``a[:] = b + q*c`` allocates two
full-size temporaries and runs at about half the speed). NumPy releases the
GIL inside ufuncs, so the threads stream in parallel like OpenMP STREAM.

Without NumPy a stdlib fallback copies bytearrays through memoryviews on one
thread and reports it as copy only (method "stdlib_memoryview_copy").

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import glob
import os
import threading
import time
from typing import Any, Callable, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text_or_none
from ansible_collections.continuum.hydra.plugins.module_utils._host.procfs import meminfo_kib
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.cpu import usable_cpus
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.stats import FALLBACK, OK, BenchError, Progress, cv, mean, outcome, rounded

MIB = 1024 * 1024
TRIAD_SCALAR = 3.0
CHUNK_ELEMENTS = 1 << 17  # 1 MiB of float64 per array: three chunks stay in L2/L3
MIN_ARRAY_BYTES = 64 * MIB
FALLBACK_LLC_BYTES = 32 * MIB
MAX_CV = 0.15  # above this the repeats disagree too much for the best to mean anything


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


class StreamKernels:
    """The three arrays and, per thread, its chunked copy and triad kernels (NumPy, no temporaries)."""

    def __init__(self, numpy: Any, elements: int, threads: int, chunk_elements: int = CHUNK_ELEMENTS) -> None:
        self.elements = elements
        self.a = numpy.zeros(elements)
        self.b = numpy.full(elements, 1.0)  # full() writes every page: no first-touch cost in the timings
        self.c = numpy.full(elements, 2.0)
        self.numpy = numpy
        bounds = [elements * part // threads for part in range(threads + 1)]
        self.parts = [self._chunks(bounds[i], bounds[i + 1], chunk_elements) for i in range(threads)]

    def _chunks(self, start: int, stop: int, chunk: int) -> list[tuple[Any, Any, Any]]:
        return [(self.a[i:min(i + chunk, stop)], self.b[i:min(i + chunk, stop)], self.c[i:min(i + chunk, stop)])
                for i in range(start, stop, chunk)]

    def copy(self, part: int) -> None:
        # np.positive is a SIMD load/store loop like STREAM's a[j] = b[j]; copyto is memcpy, whose
        # string-instruction paths run 30% slower than that loop on some CPUs (AMD EPYC VMs here).
        positive = self.numpy.positive
        for a, b, _c in self.parts[part]:
            positive(b, out=a)

    def triad(self, part: int) -> None:
        multiply, add = self.numpy.multiply, self.numpy.add
        for a, b, c in self.parts[part]:
            multiply(c, TRIAD_SCALAR, out=a)
            add(a, b, out=a)

    def bytes_moved(self, kernel: str) -> int:
        return {"copy": 16, "triad": 24}[kernel] * self.elements


class ThreadTeam:
    """One thread per part, released together for each kernel run; run() returns the wall time of a run."""

    def __init__(self, kernels: StreamKernels, threads: int) -> None:
        self._kernels = kernels
        self._job: Optional[str] = None
        self._error: Optional[Exception] = None
        self._barrier = threading.Barrier(threads + 1)
        self._threads = [threading.Thread(target=self._work, args=(part,), name="hydra-stream-%d" % part) for part in range(threads)]
        for thread in self._threads:
            thread.daemon = True
            thread.start()

    def _work(self, part: int) -> None:
        try:
            while True:
                self._barrier.wait()
                job = self._job
                if job is None:
                    return
                getattr(self._kernels, job)(part)
                self._barrier.wait()
        except threading.BrokenBarrierError:
            return
        except Exception as exc:  # pylint: disable=broad-exception-caught
            self._error = exc
            self._barrier.abort()

    def run(self, job: str) -> float:
        self._job = job
        start = time.perf_counter()
        try:
            self._barrier.wait()
            self._barrier.wait()
        except threading.BrokenBarrierError:
            raise BenchError("memory benchmark thread failed: %s" % self._error) from None
        return time.perf_counter() - start

    def close(self) -> None:
        self._job = None
        try:
            self._barrier.wait(timeout=5)
        except threading.BrokenBarrierError:
            pass
        for thread in self._threads:
            thread.join(timeout=5)


def _measure(run: Callable[[str], float], bytes_moved: Callable[[str], int], warmup_s: float, duration_s: float,
             progress: Optional[Progress], kernels: tuple[str, ...] = ("copy", "triad"), min_repeats: int = 3) -> dict[str, list[float]]:
    """Alternate the kernels through the warmup, then measure; GB/s of every repeat, per kernel."""
    for kernel in kernels:
        run(kernel)
    warm_end = time.perf_counter() + warmup_s
    while time.perf_counter() < warm_end:
        for kernel in kernels:
            run(kernel)
    rates: dict[str, list[float]] = dict((kernel, []) for kernel in kernels)
    start = time.perf_counter()
    while time.perf_counter() - start < duration_s or len(rates[kernels[0]]) < min_repeats:
        for kernel in kernels:
            rates[kernel].append(bytes_moved(kernel) / run(kernel) / 1e9)
        if progress is not None:
            progress("memory", time.perf_counter() - start, duration_s)
    return rates


def run_memory(warmup_s: float, duration_s: float, array_mib: Optional[int] = None, threads: Optional[int] = None,
               progress: Optional[Progress] = None, root: str = "/", numpy: Any = None) -> dict[str, Any]:
    """STREAM copy/triad GB/s (best of the repeats after warmup), NumPy when importable, else the stdlib copy."""
    llc = last_level_cache_bytes(root)
    size, notes = choose_array_bytes(llc, available_memory_bytes(root), array_mib * MIB if array_mib else None)
    if llc is None:
        notes.append("last-level cache size unreadable: assumed %d MiB" % (FALLBACK_LLC_BYTES // MIB))
    if numpy is None:
        try:
            import numpy  # pylint: disable=import-outside-toplevel,redefined-outer-name
        except ImportError as exc:
            notes.append("NumPy is not importable (%s): stdlib memoryview copy, no triad" % exc)
            return run_memory_stdlib(warmup_s, duration_s, size, llc, notes, progress)
    threads = threads or usable_cpus()
    try:
        kernels = StreamKernels(numpy, size // 8, threads, CHUNK_ELEMENTS * max(1, threads // 16))
    except MemoryError:
        raise BenchError("cannot allocate 3 arrays of %d MiB" % (size // MIB)) from None
    team = ThreadTeam(kernels, threads) if threads > 1 else None
    try:
        run: Callable[[str], float]
        if team is not None:
            run = team.run
        else:
            def run(kernel: str) -> float:
                start = time.perf_counter()
                getattr(kernels, kernel)(0)
                return time.perf_counter() - start
        rates = _measure(run, kernels.bytes_moved, warmup_s, duration_s, progress)
    finally:
        if team is not None:
            team.close()
    triad_cv = cv(rates["triad"])
    if triad_cv is not None and triad_cv > MAX_CV:
        notes.append("triad repeats vary by %.0f%% (CV above %.0f%%): the machine was busy, treat the figures as noisy"
                     % (100 * triad_cv, 100 * MAX_CV))
    return outcome(
        OK, "STREAM copy/triad, NumPy blocked out= kernels on %d threads" % threads,
        method="numpy_blocked",
        copy_gbps=rounded(max(rates["copy"])),
        triad_gbps=rounded(max(rates["triad"])),
        copy_gbps_mean=rounded(mean(rates["copy"])),
        triad_gbps_mean=rounded(mean(rates["triad"])),
        triad_cv=rounded(triad_cv, 4),
        repeats=len(rates["triad"]),
        threads=threads,
        array_bytes=size,
        llc_bytes=llc,
        warmup_s=warmup_s,
        duration_s=duration_s,
        notes=notes,
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
    rates = _measure(run, lambda _kernel: 2 * len(source), warmup_s, duration_s, progress, kernels=("copy",))["copy"]
    return outcome(
        FALLBACK, "stdlib memoryview copy (NumPy absent): copy only, one thread",
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

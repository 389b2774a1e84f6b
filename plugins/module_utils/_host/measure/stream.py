# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""STREAM copy and triad with NumPy, in this process or as a worker (``python -c SOURCE ARGS_JSON``).

STREAM rules kept: copy counts 16 bytes and triad (a = b + q*c) 24 bytes per element (write-allocate traffic
not counted); the best repeat after a warmup is reported. Array sizing (4x the last-level cache) is the
caller's: membench.choose_array_bytes.

NumPy is written without temporaries: each thread owns a contiguous slice of the arrays and walks it in
cache-sized chunks with ``out=`` ufuncs, so the intermediate q*c lives in cache (a naive ``a[:] = b + q*c``
allocates two full-size temporaries and runs at about half the speed). NumPy releases the GIL inside ufuncs,
so the threads stream in parallel like OpenMP STREAM.

The triad runs two ways with the same traffic (StreamKernels.triad: two ufuncs per chunk; triad_matmul: one
fused BLAS gemv pass per chunk). Like STREAM users who run 1..N OpenMP threads and keep the best,
``best_over_threads`` measures each thread count with each triad and reports the best (on a small or busy
machine one thread streams faster than two; the fused pass gains most on one thread). Run as a worker, the
BLAS is single-threaded (membench sets the thread variables), so our threads are the only ones.

As a worker it prints one JSON line; without NumPy {"status": "absent", "reason"}.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

# Standard library only, and nothing from the collection: worker.py runs this file's source as ``python -c``.
# NumPy is handed in (profile imports it once) or imported in main().
import json
import sys
import threading
import time
from typing import Any, Callable, Optional

# A worker imports nothing from the collection (worker.py runs this source as ``python -c``): its answer's
# reading outcomes are spelled here, as _status.READ_OK / READ_ABSENT / READ_FAILED.
READ_OK, READ_ABSENT, READ_FAILED = "ok", "absent", "error"
TRIAD_SCALAR = 3.0
# 2 MiB of float64 per array: the chunks stay in L2/L3, and a call's Python overhead is ~2% of its streaming time
# (benchmarks/memory_vs_c_stream.py: 256K elements beat 64K-128K and 512K-1M for the fused triad on one thread).
CHUNK_ELEMENTS = 1 << 18
KERNELS = ("copy", "triad")
TRIADS = ("triad", "triad_matmul")  # the two ways to run the triad (StreamKernels); the faster one is reported
BYTES_PER_ELEMENT = {"copy": 16, "triad": 24, "triad_matmul": 24}

# A progress callback: progress(step, done, total[, unit]).
Progress = Callable[..., None]


class StreamError(Exception):
    """A stream thread failed."""


class StreamKernels:
    """The three arrays and, per thread, its chunked copy and triad kernels (NumPy, no temporaries).

    Two triads, the same bytes moved (read b and c, write a; 24 bytes per element):
    ``triad`` is two ``out=`` ufuncs per cache-sized chunk (q*c into a, then a += b: the chunk of a is
    read back from cache); ``triad_matmul`` is one fused pass per chunk, ``[1, q] @ [b; c]`` (b and c are the
    two rows of one (2, n) array, so the product is BLAS gemv over both at once). Which is faster depends on
    the CPU and the BLAS (a multi-threaded BLAS inside each of our threads oversubscribes the cores), so
    best_over_threads measures both.
    """

    def __init__(self, numpy: Any, elements: int, threads: int, chunk_elements: int = CHUNK_ELEMENTS) -> None:
        self.elements = elements
        self.a = numpy.zeros(elements)
        # Every page is written here: no first-touch cost in the timings.
        self.bc = numpy.empty((2, elements))
        self.bc[0] = 1.0
        self.bc[1] = 2.0
        self.b, self.c = self.bc[0], self.bc[1]
        self.numpy = numpy
        self.scalar = numpy.float64(TRIAD_SCALAR)
        self.weights = numpy.array([1.0, TRIAD_SCALAR])
        self.parts: list[list[tuple[Any, Any, Any, Any]]] = []
        self.split(threads, chunk_elements)

    def split(self, threads: int, chunk_elements: int = CHUNK_ELEMENTS) -> None:
        """Cut the arrays into one contiguous part per thread, each a list of chunks (the arrays are kept)."""
        bounds = [self.elements * part // threads for part in range(threads + 1)]
        self.parts = [self._chunks(bounds[i], bounds[i + 1], chunk_elements) for i in range(threads)]

    def _chunks(self, start: int, stop: int, chunk: int) -> list[tuple[Any, Any, Any, Any]]:
        return [(self.a[i:min(i + chunk, stop)], self.b[i:min(i + chunk, stop)], self.c[i:min(i + chunk, stop)],
                 self.bc[:, i:min(i + chunk, stop)]) for i in range(start, stop, chunk)]

    def copy(self, part: int) -> None:
        # np.positive is a SIMD load/store loop like STREAM's a[j] = b[j]; copyto is memcpy, whose
        # string-instruction paths run 30% slower than that loop on some CPUs (AMD EPYC VMs here).
        positive = self.numpy.positive
        for a, b, _c, _bc in self.parts[part]:
            positive(b, a)

    def triad(self, part: int) -> None:
        # Positional out and a NumPy scalar: a keyword out= or a Python float costs a microsecond per call.
        multiply, add, scalar = self.numpy.multiply, self.numpy.add, self.scalar
        for a, b, c, _bc in self.parts[part]:
            multiply(c, scalar, a)
            add(a, b, a)

    def triad_matmul(self, part: int) -> None:
        matmul, weights = self.numpy.matmul, self.weights
        for a, _b, _c, bc in self.parts[part]:
            matmul(weights, bc, out=a)

    def bytes_moved(self, kernel: str) -> int:
        return BYTES_PER_ELEMENT[kernel] * self.elements


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
            raise StreamError("memory benchmark thread failed: %s" % self._error) from None
        return time.perf_counter() - start

    def close(self) -> None:
        self._job = None
        try:
            self._barrier.wait(timeout=5)
        except threading.BrokenBarrierError:
            pass
        for thread in self._threads:
            thread.join(timeout=5)


def measure(run: Callable[[str], float], bytes_moved: Callable[[str], int], warmup_s: float, duration_s: float,
            progress: Optional[Progress] = None, kernels: tuple[str, ...] = KERNELS, min_repeats: int = 3,
            label: str = "memory") -> dict[str, list[float]]:
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
            progress(label, time.perf_counter() - start, duration_s)
    return rates


def measure_threads(kernels: StreamKernels, threads: int, warmup_s: float, duration_s: float,
                    progress: Optional[Progress] = None, triad: str = "triad") -> dict[str, list[float]]:
    """The repeats' GB/s of copy and of the ``triad`` kernel (under "triad") with ``threads`` threads."""
    kernels.split(threads, CHUNK_ELEMENTS * max(1, threads // 16))
    run: Callable[[str], float]
    team = ThreadTeam(kernels, threads) if threads > 1 else None
    if team is not None:
        run = team.run
    else:
        def run(kernel: str) -> float:
            start = time.perf_counter()
            getattr(kernels, kernel)(0)
            return time.perf_counter() - start
    try:
        rates = measure(run, kernels.bytes_moved, warmup_s, duration_s, progress, kernels=("copy", triad))
    finally:
        if team is not None:
            team.close()
    return {"copy": rates["copy"], "triad": rates[triad]}


def thread_candidates(cpus: int) -> list[int]:
    """1..N threads: every count up to 4, then powers of two and N (STREAM users' usual sweep, kept short)."""
    counts = set(range(1, min(cpus, 4) + 1))
    power = 8
    while power < cpus:
        counts.add(power)
        power *= 2
    counts.add(max(1, cpus))
    return sorted(counts)


def best_over_threads(numpy: Any, elements: int, candidates: list[int], warmup_s: float, duration_s: float,
                      progress: Optional[Progress] = None, triads: tuple[str, ...] = TRIADS) -> dict[str, Any]:
    """Measure every candidate thread count with each triad kernel on the same arrays; the best triad's run.

    warmup_s and duration_s are split over the candidates (the whole takes about what one count would). A
    triad kernel that raises (a NumPy without matmul) is left out.
    """
    kernels = StreamKernels(numpy, elements, max(candidates))
    share = float(len(candidates) * len(triads))
    runs: dict[tuple[int, str], dict[str, list[float]]] = {}
    errors = []
    for threads in candidates:
        for triad in triads:
            try:
                runs[(threads, triad)] = measure_threads(kernels, threads, warmup_s / share, duration_s / share, progress, triad)
            except (StreamError, TypeError, ValueError) as exc:
                errors.append("%s on %d threads: %s" % (triad, threads, exc))
    if not runs:
        raise StreamError("; ".join(errors))
    best = max(runs, key=lambda key: max(runs[key]["triad"]))
    by_threads: dict[str, float] = {}
    by_kernel: dict[str, float] = {}
    for (threads, triad), rates in runs.items():
        top = max(rates["triad"])
        by_threads[str(threads)] = max(by_threads.get(str(threads), 0.0), top)
        by_kernel[triad] = max(by_kernel.get(triad, 0.0), top)
    return {"threads": best[0], "kernel": best[1], "rates": runs[best], "triad_gbps_by_threads": by_threads,
            "triad_gbps_by_kernel": by_kernel, "errors": errors}


def _answer(result: dict[str, Any]) -> None:
    """The one JSON line the parent reads (stdout is the protocol, not a log)."""
    sys.stdout.write(json.dumps(result) + "\n")


def main() -> None:
    args = json.loads(sys.argv[1])
    try:
        import numpy  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        _answer({"status": READ_ABSENT, "reason": "NumPy is not importable by %s: %s" % (sys.executable, exc)})
        return
    try:
        found = best_over_threads(numpy, args["array_bytes"] // 8, args["threads"], args["warmup_s"], args["duration_s"])
    except MemoryError:
        _answer({"status": READ_FAILED, "reason": "cannot allocate 3 arrays of %d MiB" % (args["array_bytes"] // 2 ** 20)})
        return
    rates = found["rates"]
    _answer({"status": READ_OK, "method": "numpy_blocked", "numpy_version": numpy.__version__, "threads": found["threads"],
             "kernel": found["kernel"], "triad_gbps_by_kernel": found["triad_gbps_by_kernel"],
             "triad_gbps": max(rates["triad"]), "copy_gbps": max(rates["copy"]), "repeats": len(rates["triad"]),
             "triad_gbps_repeats": rates["triad"], "copy_gbps_repeats": rates["copy"],
             "triad_gbps_by_threads": found["triad_gbps_by_threads"]})


if __name__ == "__main__":
    main()

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""CPU matmul worker, run as ``python -c SOURCE ARGS_JSON`` (standard library only at import).

Prints one JSON line: GFLOP/s of a sustained square matmul, NumPy (its BLAS,
with the thread count the parent set in the environment) when importable,
else a pure-Python loop labelled "stdlib_python" (orders of magnitude slower:
it measures the interpreter, not the FPUs).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

# Standard library only, and nothing from the collection: worker.py runs this file's source as ``python -c``.
import json
import operator
import sys
import time
from typing import Any, Callable


def _timed_loop(step: Callable[[], Any], warmup_s: float, duration_s: float) -> list[float]:
    """Run step() through the warmup, then until duration_s has passed (at least once); return the times."""
    step()
    warm_end = time.perf_counter() + warmup_s
    while time.perf_counter() < warm_end:
        step()
    times: list[float] = []
    end = time.perf_counter() + duration_s
    while True:
        start = time.perf_counter()
        step()
        stop = time.perf_counter()
        times.append(stop - start)
        if stop >= end:
            return times


def _figures(method: str, n: int, times: list[float], **extra: Any) -> dict[str, Any]:
    flops = 2.0 * n ** 3
    out: dict[str, Any] = {"method": method, "matrix_n": n, "iterations": len(times), "elapsed_s": sum(times),
                           "gflops": flops * len(times) / sum(times) / 1e9, "gflops_best": flops / min(times) / 1e9}
    out.update(extra)
    return out


def matmul_numpy(n: int, warmup_s: float, duration_s: float) -> dict[str, Any]:
    import numpy  # pylint: disable=import-outside-toplevel
    rng = numpy.random.default_rng(0)
    a, b = rng.random((n, n)), rng.random((n, n))
    c = numpy.empty((n, n))
    times = _timed_loop(lambda: numpy.matmul(a, b, out=c), warmup_s, duration_s)
    return _figures("numpy_matmul", n, times, numpy_version=numpy.__version__)


def matmul_stdlib(n: int, warmup_s: float, duration_s: float) -> dict[str, Any]:
    a = [[float((i * n + j) % 7) for j in range(n)] for i in range(n)]
    b_columns = [[float((i + 2 * j) % 5) for i in range(n)] for j in range(n)]
    mul = operator.mul

    def step() -> list[list[float]]:
        return [[sum(map(mul, row, column)) for column in b_columns] for row in a]
    return _figures("stdlib_python", n, _timed_loop(step, warmup_s, duration_s))


def _answer(result: dict[str, Any]) -> None:
    """The one JSON line the parent reads (stdout is the protocol, not a log)."""
    sys.stdout.write(json.dumps(result) + "\n")


def main() -> None:
    args = json.loads(sys.argv[1])
    notes: list[str] = []
    if args.get("method", "auto") != "stdlib":
        try:
            _answer(matmul_numpy(args["n"], args["warmup_s"], args["duration_s"]))
            return
        except ImportError as exc:
            notes.append("NumPy is not importable (%s): pure-Python matmul instead" % exc)
    result = matmul_stdlib(args["stdlib_n"], args["warmup_s"], args["duration_s"])
    result["notes"] = notes
    _answer(result)


if __name__ == "__main__":
    main()

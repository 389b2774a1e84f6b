# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""CPU benchmark: sustained matmul GFLOP/s on one thread and on every usable core.

Each figure comes from a worker process (cpu_worker) because a BLAS fixes its
thread count when it loads: one worker with every BLAS limited to 1 thread,
then one with as many threads as CPUs this process may run on. Without NumPy
the workers fall back to a pure-Python loop (method "stdlib_python"), and the
all-core figure is the sum of one such worker per CPU running at once.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import worker as _worker
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import cpu_worker
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.stats import Progress, outcome, rounded
from ansible_collections.continuum.hydra.plugins.module_utils._status import BENCH_FALLBACK, BENCH_OK

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")

# Worker start-up, imports and the last iteration on top of warmup + duration.
_SLACK_S = 60.0


def usable_cpus() -> int:
    """CPUs this process may run on (affinity / cpuset), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _threads_env(threads: int) -> dict[str, str]:
    return dict((name, str(threads)) for name in THREAD_VARIABLES)


def default_timeout_s(warmup_s: float, duration_s: float) -> float:
    """Each worker's timeout unless benchmark_options.cpu.timeout_s is given."""
    return warmup_s + duration_s + _SLACK_S


def run_cpu(warmup_s: float, duration_s: float, matrix_n: int = 2048, stdlib_n: int = 64, python: Optional[str] = None,
            progress: Optional[Progress] = None, timeout_s: Optional[float] = None) -> dict[str, Any]:
    threads = usable_cpus()
    timeout_s = timeout_s or default_timeout_s(warmup_s, duration_s)
    args = {"method": "auto", "n": matrix_n, "stdlib_n": stdlib_n, "warmup_s": warmup_s, "duration_s": duration_s}
    single = _worker.run_worker(cpu_worker, args, timeout_s, "cpu benchmark (1 thread)", python=python,
                                env=_threads_env(1), progress=progress)
    if single["method"] == "numpy_matmul":
        every = _worker.run_worker(cpu_worker, args, timeout_s, "cpu benchmark (%d threads)" % threads, python=python,
                                   env=_threads_env(threads), progress=progress)
        all_cores_gflops = every["gflops"]
        all_cores_iterations = every["iterations"]
    else:
        # The interpreter is single-threaded: one worker per CPU, all at once, summed.
        stdlib_args = dict(args, method="stdlib")
        procs = [_worker.start_worker(cpu_worker, stdlib_args, python=python, env=_threads_env(1)) for _cpu in range(threads)]
        answers = []
        try:
            for proc in procs:
                answers.append(_worker.finish_worker(proc, timeout_s, "cpu benchmark (%d processes)" % threads, progress=progress))
        finally:
            for proc in procs:
                if proc.poll() is None:
                    _worker.kill_group(proc)
        all_cores_gflops = sum(answer["gflops"] for answer in answers)
        all_cores_iterations = sum(answer["iterations"] for answer in answers)
    fallback = single["method"] != "numpy_matmul"
    message = ("pure-Python matmul (NumPy absent): measures the interpreter, not the FPUs" if fallback
               else "NumPy matmul %dx%d, float64" % (matrix_n, matrix_n))
    return outcome(
        BENCH_FALLBACK if fallback else BENCH_OK, message,
        method=single["method"],
        matrix_n=single["matrix_n"],
        threads=threads,
        single_thread_gflops=rounded(single["gflops"]),
        single_thread_gflops_best=rounded(single["gflops_best"]),
        all_cores_gflops=rounded(all_cores_gflops),
        scaling_x=rounded(all_cores_gflops / single["gflops"], 2) if single["gflops"] else None,
        iterations_single=single["iterations"],
        iterations_all_cores=all_cores_iterations,
        numpy_version=single.get("numpy_version"),
        warmup_s=warmup_s,
        duration_s=duration_s,
        notes=single.get("notes", []),
    )

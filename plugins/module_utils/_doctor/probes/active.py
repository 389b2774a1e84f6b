# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Active probes (doctor's deep level): measurements under load, each family in worker processes with a deadline.

``gpu_active`` runs every GPU measurement in one torch worker (_host/measure/torch_worker.py, mode "active")
in the torch interpreter (``torch_python``): seeded matmul consistency, matmul TFLOP/s, device copy, pinned
copies with the PCIe link re-read under load, and the all-reduce. Without torch, or without a GPU torch can
see, it is absent (the checks SKIP with the reason); a worker that crashes or runs past its deadline is a
failure (ERROR), killed with its process group.

``memory_active`` runs the NumPy STREAM triad in a worker (best over 1..N threads) and the same machine's
compiled-C STREAM triad (compiled in a temporary directory under the same deadline) as its reference.

Deadline: ``timeouts.active`` (default ACTIVE_TIMEOUT_S), capped like every probe timeout by the time left of the
run's deadline. Progress: each worker step's duration is in the data (``steps``), so a long run shows
where its time went in the check's details.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import sys
import time
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._status import READ_ABSENT, READ_OK

# The most one active probe may take when the run names no timeouts.active (doctor's total is 300 s by default).
ACTIVE_TIMEOUT_S = 240.0
# torch import and CUDA context creation before the worker's own deadline starts counting work.
TORCH_START_S = 30.0

# The GPU worker's work: small enough for a doctor run, large enough to load the GPU (matmul n=8192 as profile).
GPU_ARGS = {"matrix_n": 8192, "check_n": 1024, "seed": 20261124, "warmup_s": 0.5, "duration_s": 2.0,
            "device_copy_mib": 1024, "transfer_mib": 256, "repeats": 5, "allreduce_mib": 256}
# cuBLAS is deterministic for a given GPU model and workspace setting (cuBLAS docs, "Results reproducibility").
GPU_ENV = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}

# The host triad: short, since doctor is not profile (profile's memory benchmark runs for minutes).
MEMORY_WARMUP_S = 0.5
MEMORY_DURATION_S = 2.0
# Share of the memory deadline the NumPy worker may use; the C reference gets what it leaves.
NUMPY_SHARE = 0.6


def active_timeout(options: Mapping[str, Any]) -> float:
    """Seconds an active probe may take: timeouts.active (doctor caps it by the time left of timeouts.total)."""
    return float((options.get("timeouts") or {}).get("active") or ACTIVE_TIMEOUT_S)


def probe_gpu_active(options: Mapping[str, Any]) -> dict[str, Any]:
    """Every GPU's active measurements from one torch worker; ProbeAbsent without torch or a GPU it sees."""
    python = options.get("torch_python") or sys.executable
    if options.get("torch_python") and not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise ProbeError("torch_python %s is not an executable file; give the path of a Python interpreter" % python)
    # The measuring code loads only at level deep: a host compiles what it imports, every run.
    from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import torch_worker
    from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import worker as _worker

    timeout = active_timeout(options)
    args = dict(GPU_ARGS, mode="active", deadline_s=max(1.0, timeout - TORCH_START_S))
    start = time.monotonic()
    try:
        answer = _worker.run_worker(torch_worker, args, timeout, "active GPU worker", python=python, env=GPU_ENV)
    except _worker.WorkerError as exc:
        raise ProbeError(str(exc)) from None
    if answer.get("status") == READ_ABSENT:
        raise ProbeAbsent(str(answer.get("reason")))
    if answer.get("status") != READ_OK:
        raise ProbeError("active GPU worker answered %r" % (answer,))
    if not answer.get("cuda_available") or not answer.get("gpus"):
        raise ProbeAbsent("torch %s in %s sees no GPU (CUDA/ROCm not available)" % (answer.get("torch_version"), python))
    answer["python"] = python
    answer["seconds"] = round(time.monotonic() - start, 3)
    return answer


def probe_memory_active(options: Mapping[str, Any], python: Optional[str] = None) -> dict[str, Any]:
    """Host STREAM triad (NumPy worker, best over 1..N threads) and the compiled-C reference; ProbeAbsent without NumPy."""
    from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import membench, stream
    from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import worker as _worker

    timeout = active_timeout(options)
    end = time.monotonic() + timeout
    llc = membench.last_level_cache_bytes()
    size, notes = membench.choose_array_bytes(llc, membench.available_memory_bytes())
    threads = stream.thread_candidates(membench.usable_cpus())
    try:
        answer = membench.numpy_triad(size, threads, MEMORY_WARMUP_S, MEMORY_DURATION_S, NUMPY_SHARE * timeout, python=python)
    except _worker.WorkerError as exc:
        raise ProbeError(str(exc)) from None
    if answer.get("status") == READ_ABSENT:
        raise ProbeAbsent(str(answer.get("reason")))
    if answer.get("status") != READ_OK:
        raise ProbeError("NumPy STREAM worker: %s" % answer.get("reason", answer))
    data: dict[str, Any] = {"numpy": answer, "array_bytes": size, "llc_bytes": llc, "notes": notes,
                            "c_reference": None, "c_reference_reason": None}
    try:
        data["c_reference"] = membench.c_triad_reference(size, threads, max(0.001, end - time.monotonic()))
    except ProbeAbsent as exc:
        data["c_reference_reason"] = str(exc)
    except ProbeError as exc:
        # A compiler that fails is not the memory's fault: the triad is then judged against the class figure.
        data["c_reference_reason"] = "C reference failed: %s" % exc
    return data

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU benchmark: per GPU, in its own torch subprocess with a timeout (see torch_worker).

Without torch (in the module's interpreter, or in ``torch_python``) the
benchmark is skipped with the reason; a GPU whose worker fails or times out
is reported as an error by index while the others are still measured.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import time
from typing import Any, Callable, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import torch_worker
from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import worker as _worker
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench.stats import BenchError, Progress, outcome, rounded
from ansible_collections.continuum.hydra.plugins.module_utils._status import BENCH_FAILED, BENCH_OK, BENCH_SKIPPED, READ_ABSENT, READ_OK

FIGURES = ("bf16_tflops", "fp16_tflops", "fp32_tflops", "h2d_gbps", "d2h_gbps", "memory_bandwidth_gbps")
# CUDA context creation, torch import and allocations on top of the timed loops.
_SLACK_S = 120.0
INVENTORY_TIMEOUT_S = 120.0


def torch_inventory(python: Optional[str] = None, timeout_s: float = INVENTORY_TIMEOUT_S) -> dict[str, Any]:
    """torch/CUDA versions and devices as the worker's interpreter sees them; status "absent" without torch."""
    return _worker.run_worker(torch_worker, {"mode": "inventory"}, timeout_s, "torch inventory", python=python)


def default_timeout_s(warmup_s: float, duration_s: float) -> float:
    return 3 * (warmup_s + duration_s) + _SLACK_S


def gpu_entry(answer: dict[str, Any]) -> dict[str, Any]:
    """One worker answer -> the per-GPU record (figures rounded, units in the names)."""
    entry: dict[str, Any] = {"index": answer.get("index"), "name": answer.get("name"), "status": BENCH_OK, "message": None}
    for key in FIGURES:
        entry[key] = rounded(answer.get(key), 2)
    entry["matrix_n"] = answer.get("matrix_n")
    entry["notes"] = answer.get("notes", [])
    return entry


def run_gpu(warmup_s: float, duration_s: float, python: Optional[str] = None, matrix_n: int = 8192, transfer_mib: int = 256,
            device_copy_mib: int = 1024, repeats: int = 10, timeout_s: Optional[float] = None, progress: Optional[Progress] = None,
            inventory: Optional[dict[str, Any]] = None, clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Every visible GPU, one after the other. Each entry keeps its measuring window in "_window"."""
    inventory = inventory or torch_inventory(python)
    if inventory.get("status") == READ_ABSENT:
        return outcome(BENCH_SKIPPED, inventory.get("reason"), method="torch", gpus=[])
    if not inventory.get("cuda_available") or not inventory.get("devices"):
        return outcome(BENCH_SKIPPED, "torch %s sees no CUDA device" % inventory.get("torch_version"), method="torch",
                       torch_version=inventory.get("torch_version"), gpus=[])
    timeout_s = timeout_s or default_timeout_s(warmup_s, duration_s)
    entries: list[dict[str, Any]] = []
    for device in inventory["devices"]:
        args = {"mode": "bench", "device": device["index"], "matrix_n": matrix_n, "transfer_mib": transfer_mib,
                "device_copy_mib": device_copy_mib, "repeats": repeats, "warmup_s": warmup_s, "duration_s": duration_s}
        start = clock()
        try:
            answer = _worker.run_worker(torch_worker, args, timeout_s, "gpu %d benchmark" % device["index"],
                                        python=python, progress=progress)
            if answer.get("status") != READ_OK:
                raise BenchError(answer.get("reason") or "gpu %d benchmark answered %r" % (device["index"], answer))
            entry = gpu_entry(answer)
        except BenchError as exc:
            entry = dict(gpu_entry({"index": device["index"], "name": device["name"]}), status=BENCH_FAILED, message=str(exc))
        entry["_window"] = (start, clock())
        entries.append(entry)
    failed = [entry for entry in entries if entry["status"] != BENCH_OK]
    message = "%d of %d GPUs measured" % (len(entries) - len(failed), len(entries))
    if failed:
        message += "; " + "; ".join("GPU %s: %s" % (entry["index"], entry["message"]) for entry in failed)
    return outcome(
        BENCH_FAILED if failed else BENCH_OK, message,
        method="torch",
        torch_version=inventory.get("torch_version"),
        cuda_version=inventory.get("cuda_version"),
        matrix_n=matrix_n,
        transfer_bytes=transfer_mib * 1024 * 1024,
        warmup_s=warmup_s,
        duration_s=duration_s,
        gpus=entries,
    )

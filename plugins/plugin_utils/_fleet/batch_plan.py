# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Heterogeneous batch plan: split a global batch across GPUs in proportion to measured throughput (pure).

In synchronous data-parallel training every step waits for the slowest rank, so with uniform batches
a fleet of mixed GPUs runs at the pace of its slowest GPU. Giving each GPU a batch proportional to its
throughput (the idea of the Heterogeneous Cluster Performance Profiler) makes the ranks finish
together. Each GPU gets at least 1 sample and at most what fits in its memory
(memory_total_mib x headroom / memory per sample). Batches are rounded down, and the samples left go one
by one to the GPU that would finish first with one more, so the batches add up to the global batch
exactly and the slowest rank is as fast as rounding allows.

Only hosts whose status is healthy or warning take part. A GPU's throughput is its own figure for the
metric, else its host's figure divided among its GPUs; for a lower-is-better metric (a step time),
throughput is its inverse.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import heapq
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._status import HEALTHY, WARNING
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.figures import gpu_figures, gpu_records, host_figures, lower_is_better, number


class PlannedGpu(NamedTuple):
    """One GPU the plan can give samples to."""

    host: str
    index: Any
    uuid: Optional[str]
    name: Optional[str]
    memory_total_mib: Optional[float]
    throughput: float  # samples per unit time: the metric, or its inverse for a lower-is-better metric


PLAN_KIND = "continuum.hydra.batch_plan"
PLAN_SCHEMA_VERSION = "1.1.0"
DEFAULT_METRIC = "bf16_tflops"
MEMORY_HEADROOM = 0.9  # activations aside, the allocator and CUDA context need the rest
ELIGIBLE = (HEALTHY, WARNING)


class BatchPlanError(ValueError):
    """The plan cannot be made: one line naming the bad value and what is accepted."""


def _throughput(value: object, lower_better: bool) -> Optional[float]:
    value = number(value)
    if value is None or value <= 0:
        return None
    return 1.0 / value if lower_better else value


def _gpus_of(host: str, summary: Optional[Mapping[str, Any]], metric: str, lower_better: bool) -> tuple[Optional[list[PlannedGpu]], Optional[str]]:
    """The planned GPUs of one host, or a reason it takes no part."""
    gpus = gpu_records(summary)
    if not gpus:
        return None, "no GPUs in its profile"
    host_value = _throughput(host_figures(summary).get(metric), lower_better)
    out = []
    for gpu in sorted(gpus, key=lambda g: (g.get("index") is None, g.get("index"))):
        own = _throughput(gpu_figures(gpu).get(metric), lower_better)
        if own is None and host_value is not None:
            # A host-level rate is shared by its GPUs; a host-level time is not divided (each GPU takes it).
            own = host_value if lower_better else host_value / len(gpus)
        if own is None:
            return None, "no %s figure for GPU %s" % (metric, gpu.get("index"))
        out.append(PlannedGpu(host, gpu.get("index"), gpu.get("uuid"), gpu.get("name"), number(gpu.get("memory_total_mib")), own))
    return out, None


def _caps(gpus: Sequence[PlannedGpu], memory_per_sample_mib: Optional[float]) -> list[Optional[int]]:
    if not memory_per_sample_mib:
        return [None] * len(gpus)
    return [int(math.floor(g.memory_total_mib * MEMORY_HEADROOM / memory_per_sample_mib)) if g.memory_total_mib else None
            for g in gpus]


def _known(caps: Sequence[Optional[int]]) -> dict[int, int]:
    """{position: cap} of the GPUs whose batch memory bounds."""
    return {i: cap for i, cap in enumerate(caps) if cap is not None}


def _proportional(throughputs: Sequence[float], caps: Sequence[Optional[int]], total: int) -> list[float]:
    """Real-valued batches in [1, cap] proportional to throughput where no bound binds, summing to total."""
    n = len(throughputs)
    capped = _known(caps)
    fixed: dict[int, float] = {}
    while True:
        free = [i for i in range(n) if i not in fixed]
        if not free:
            break
        remaining = total - sum(fixed.values())
        scale = remaining / sum(throughputs[i] for i in free)
        over = [i for i in free if i in capped and scale * throughputs[i] > capped[i]]
        under = [] if over else [i for i in free if scale * throughputs[i] < 1]
        if not over and not under:
            return [fixed[i] if i in fixed else scale * throughputs[i] for i in range(n)]
        for i in over:
            fixed[i] = capped[i]
        for i in under:
            fixed[i] = 1
    return [fixed[i] for i in range(n)]


def _integers(real: Sequence[float], caps: Sequence[Optional[int]], throughputs: Sequence[float], total: int) -> list[int]:
    """Round down, then give each leftover sample to the GPU that would still finish first with it: the step
    waits for the slowest rank, so this keeps the maximum of batch / throughput as low as rounding allows."""
    capped = _known(caps)
    batches = [max(1, int(math.floor(x + 1e-9))) for x in real]
    room = [(float(b + 1) / t, i) for i, (b, t) in enumerate(zip(batches, throughputs)) if i not in capped or b < capped[i]]
    heapq.heapify(room)
    for _step in range(total - sum(batches)):
        _room_left, i = heapq.heappop(room)
        batches[i] += 1
        if i not in capped or batches[i] < capped[i]:
            heapq.heappush(room, (float(batches[i] + 1) / throughputs[i], i))
    return batches


def _uniform(throughputs: Sequence[float], total: int) -> list[int]:
    """Uniform batching as well as it can be done: B // n samples each, the remainder one each to the fastest GPUs."""
    base, extra = divmod(total, len(throughputs))
    fastest = set(sorted(range(len(throughputs)), key=lambda i: (-throughputs[i], i))[:extra])
    return [base + (1 if i in fastest else 0) for i in range(len(throughputs))]


def validate(global_batch_size: object, memory_per_sample_mib: Any) -> None:
    if isinstance(global_batch_size, bool) or not isinstance(global_batch_size, int) or global_batch_size < 1:
        raise BatchPlanError("batch_global_size: %r is not a positive integer number of samples" % (global_batch_size,))
    if memory_per_sample_mib is not None and (number(memory_per_sample_mib) is None or memory_per_sample_mib <= 0):
        raise BatchPlanError("batch_memory_per_sample_mib: %r is not a positive number of MiB" % (memory_per_sample_mib,))


def plan_batches(profiles: Mapping[str, Any], host_status: Mapping[str, str], global_batch_size: int,
                 memory_per_sample_mib: Optional[float] = None, metric: str = DEFAULT_METRIC,
                 generated_at: Optional[str] = None, workload: Optional[str] = None) -> dict[str, Any]:
    """The plan dict. Problems that make a plan impossible are its ``error`` (one line), with no hosts.

    workload: the plan reads a workload's throughput (profiles from _fleet/workloads.py batch_profiles, under
    ``metric``): the plan names the workload as its metric, with ``source`` workload."""
    validate(global_batch_size, memory_per_sample_mib)
    lower_better = lower_is_better(metric)
    plan: dict[str, Any] = {"schema_version": PLAN_SCHEMA_VERSION, "kind": PLAN_KIND, "generated_at": generated_at,
                            "global_batch_size": global_batch_size, "memory_per_sample_mib": memory_per_sample_mib, "metric": metric,
                            "memory_headroom": MEMORY_HEADROOM, "error": None, "hosts": {}, "excluded_hosts": {}, "gpus_planned": 0,
                            "uniform": None, "expected_step_time_gain": None, "expected_speedup": None}
    if workload is not None:
        plan.update(metric=workload, source="workload")
    gpus: list[PlannedGpu] = []
    for host in sorted(host_status):
        if host_status[host] not in ELIGIBLE:
            plan["excluded_hosts"][host] = "status %s" % host_status[host]
            continue
        if host not in profiles:
            plan["excluded_hosts"][host] = "no successful %s run" % workload if workload else "not profiled"
            continue
        found, reason = _gpus_of(host, profiles[host], metric, lower_better)
        if reason:
            plan["excluded_hosts"][host] = reason
        else:
            gpus.extend(found or [])
    if not gpus:
        plan["error"] = "no GPU with a %s figure on a healthy or warning host: nothing to plan" % plan["metric"]
        return plan
    caps = _caps(gpus, memory_per_sample_mib)
    if global_batch_size < len(gpus):
        plan["error"] = "batch_global_size %d is smaller than the %d GPUs planned: each needs at least 1 sample" % (
            global_batch_size, len(gpus))
        return plan
    capped = _known(caps)
    if any(c < 1 for c in capped.values()):
        worst = min(i for i, c in capped.items() if c < 1)
        plan["error"] = "one sample of %s MiB does not fit in GPU %s of %s (%s MiB x %.1f)" % (
            memory_per_sample_mib, gpus[worst].index, gpus[worst].host, gpus[worst].memory_total_mib, MEMORY_HEADROOM)
        return plan
    if len(capped) == len(caps) and sum(capped.values()) < global_batch_size:
        plan["error"] = "batch_global_size %d does not fit: the planned GPUs hold at most %d samples of %s MiB" % (
            global_batch_size, sum(capped.values()), memory_per_sample_mib)
        return plan
    throughputs = [g.throughput for g in gpus]
    batches = _integers(_proportional(throughputs, caps, global_batch_size), caps, throughputs, global_batch_size)
    uniform = _uniform(throughputs, global_batch_size)
    uniform_time = max(b / t for b, t in zip(uniform, throughputs))
    planned_time = max(b / t for b, t in zip(batches, throughputs))
    for gpu, batch, cap in zip(gpus, batches, caps):
        entry = plan["hosts"].setdefault(gpu.host, {"batch_size": 0, "gpus": []})
        entry["batch_size"] += batch
        entry["gpus"].append({"index": gpu.index, "uuid": gpu.uuid, "name": gpu.name, "batch_size": batch,
                              "throughput": gpu.throughput, "max_batch_size": cap})
    plan["gpus_planned"] = len(gpus)
    plan["uniform"] = {"batch_size_per_gpu": global_batch_size / float(len(gpus)),
                       "fits_memory": all(c is None or u <= c for u, c in zip(uniform, caps))}
    plan["expected_step_time_gain"] = 1.0 - planned_time / uniform_time
    plan["expected_speedup"] = uniform_time / planned_time
    return plan

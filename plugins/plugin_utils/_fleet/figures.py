# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Fleet figures: what number a host and each of its GPUs has for each metric, and what its unit says (pure).

Every fleet analysis and renderer that reads a benchmark figure reads it here: the profile summary
(profile_summary.py) builds a host's ``figures`` from its profile result with profile_figures() and
gpu_figure_row(); stragglers, the batch plan, history and the renderers read them back with
host_figures(), gpu_records() and gpu_figures().

A profile summary carries ``figures`` {metric: value} and ``gpus`` [{uuid, index, name, ..., figures}]; a
GPU's figures may also sit on the GPU record itself (the profile's per-GPU benchmark entries do). Metric
names end with their unit; only rates and times are compared between hosts (is_performance_metric), and
higher is better unless the name is a time or a latency (lower_is_better).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import functools
import math
from collections.abc import Iterable, Mapping
from typing import Any, Optional

TIME_UNITS = ("ns", "us", "ms", "s", "sec", "seconds")
RATE_UNITS = ("tflops", "gflops", "mflops", "flops", "gbps", "mbps", "kbps", "gibps", "mibps", "gbs", "iops", "ops")

# The profile's per-GPU benchmark figures (profile's gpu_sustained entries), units in their names.
GPU_FIGURES = ("bf16_tflops", "fp16_tflops", "fp32_tflops", "h2d_gbps", "d2h_gbps", "memory_bandwidth_gbps")

# Host figures of a profile summary, in the order they are shown: (figure, benchmark, path in its result,
# the benchmark method its value must come from, or None). Figures of different instruments must not be ranked
# against each other (a host would read as a straggler): a stdlib fallback measures the interpreter, not the
# machine, and is never a figure; NumPy's memory triad reaches 0.7-1.0x of compiled STREAM's, so each has its name.
HOST_FIGURES = (
    ("cpu_single_thread_gflops", "cpu_sustained", ("single_thread_gflops",), "numpy_matmul"),
    ("cpu_all_cores_gflops", "cpu_sustained", ("all_cores_gflops",), "numpy_matmul"),
    ("cpu_method", "cpu_sustained", ("method",), None),
    ("memory_triad_gbps", "memory_bandwidth", ("triad_gbps",), "c_stream"),
    ("memory_copy_gbps", "memory_bandwidth", ("copy_gbps",), "c_stream"),
    ("memory_numpy_triad_gbps", "memory_bandwidth", ("triad_gbps",), "numpy_blocked"),
    ("memory_numpy_copy_gbps", "memory_bandwidth", ("copy_gbps",), "numpy_blocked"),
    ("memory_method", "memory_bandwidth", ("method",), None),
    ("disk_read_iops", "disk_random_io", ("read_iops",), None),
    ("disk_read_p99_us", "disk_random_io", ("read_latency_us", "p99"), None),
    ("disk_seq_read_mbps", "disk_random_io", ("seq_read_mbps",), None),
    ("disk_seq_write_mbps", "disk_random_io", ("seq_write_mbps",), None),
    ("disk_o_direct", "disk_random_io", ("o_direct",), None),
)
GPU_BENCHMARK = "gpu_sustained"
# The fleet-wide spread of each per-GPU figure sits among the host figures under this prefix (gpu_bf16_tflops).
GPU_SPREAD_PREFIX = "gpu_"


@functools.lru_cache(maxsize=4096)  # a fleet has a few dozen metric names, asked about per host and GPU
def is_performance_metric(metric: str) -> bool:
    """Whether a figure's name carries a rate unit (``gbps``, ``iops``, ``tflops``: ``cpu_gflops_all_cores``,
    ``memory_triad_gbps``) or ends with a time unit (``_us``, ``_ms``, ``_per_s``) or says latency: only those are
    compared between hosts. Counts, temperatures (``_c``) and labels are not."""
    parts = str(metric).lower().split("_")
    return len(parts) > 1 and (any(p in RATE_UNITS for p in parts) or parts[-1] in TIME_UNITS or "latency" in parts)


@functools.lru_cache(maxsize=4096)
def lower_is_better(metric: str) -> bool:
    """Metric names end with their unit; higher is better unless the name is a time or a latency.

    ``read_latency_us``, ``step_time_ms`` and ``allreduce_latency`` are lower-is-better;
    ``triad_gbps``, ``read_iops``, ``bf16_tflops`` and ``samples_per_s`` (a rate) are higher-is-better.
    """
    parts = metric.lower().split("_")
    if "latency" in parts:
        return True
    return len(parts) > 1 and parts[-1] in TIME_UNITS and parts[-2] != "per"


def number(value: object) -> Optional[float]:
    """A finite float, or None for anything else (None, bools, strings, NaN, infinities)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _dig(value: Any, path: Iterable[str]) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def benchmark(result: Mapping[str, Any], name: str) -> dict[str, Any]:
    """One benchmark's result in a profile result ({} when absent)."""
    section = _dig(result, ("benchmarks", name))
    return section if isinstance(section, dict) else {}


def profile_figures(result: Mapping[str, Any]) -> dict[str, Any]:
    """A profile result's host figures (HOST_FIGURES, in that order); None where not measured or not comparable."""
    figures: dict[str, Any] = {}
    for figure, name, path, method in HOST_FIGURES:
        section = benchmark(result, name)
        comparable = method is None or section.get("method") == method
        figures[figure] = _dig(section, path) if comparable else None
    return figures


def gpu_figure_row(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A profile's per-GPU benchmark entry -> its GPU_FIGURES, None where not measured."""
    return {key: entry.get(key) for key in GPU_FIGURES}


def spread(values: Iterable[Optional[float]]) -> Optional[dict[str, float]]:
    """min, mean (3 decimals) and max of the values that are not None; None when there is none."""
    present = [value for value in values if value is not None]
    if not present:
        return None
    return {"min": min(present), "mean": round(sum(present) / len(present), 3), "max": max(present)}


def gpu_spreads(measured: Iterable[Mapping[str, Any]]) -> dict[str, Optional[dict[str, float]]]:
    """The spread over a host's measured GPUs of each per-GPU figure, keyed gpu_<figure>."""
    rows = list(measured)
    return {GPU_SPREAD_PREFIX + key: spread(row.get(key) for row in rows) for key in GPU_FIGURES}


def performance(figures: Mapping[str, Any]) -> dict[str, float]:
    """The figures that are comparable numbers (rates and times), as floats."""
    out = {}
    for metric, raw in figures.items():
        value = number(raw)
        if value is not None and is_performance_metric(metric):
            out[metric] = value
    return out


def host_figures(summary: Optional[Mapping[str, Any]]) -> dict[str, float]:
    """A profile summary's host-level performance figures, as floats."""
    figures = (summary or {}).get("figures")
    return performance(figures) if isinstance(figures, dict) else {}


def gpu_figures(gpu: Mapping[str, Any]) -> dict[str, float]:
    """A GPU record's performance figures: its ``figures``, or the figures set on the record itself."""
    figures = gpu.get("figures")
    return performance(figures if isinstance(figures, dict) else gpu)


def gpu_records(summary: Optional[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A profile summary's GPU records (anything that is not a record left out)."""
    return [g for g in (summary or {}).get("gpus") or [] if isinstance(g, dict)]

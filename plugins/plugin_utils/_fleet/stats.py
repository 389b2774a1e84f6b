# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Robust statistics for fleet analysis, and the unit convention of benchmark figures (pure).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import functools
import math

# Iglewicz and Hoaglin's modified z-score: 0.6745 is the 0.75 quantile of the standard normal, so
# 0.6745 * (x - median) / MAD is comparable to a z-score on normal data.
MAD_SCALE = 0.6745
# When more than half the values are equal, MAD is 0; the mean absolute deviation scaled by
# 1.253314 (sqrt(pi / 2)) stands in for the standard deviation instead.
MEANAD_SCALE = 1.253314

TIME_UNITS = ("ns", "us", "ms", "s", "sec", "seconds")
RATE_UNITS = ("tflops", "gflops", "mflops", "flops", "gbps", "mbps", "kbps", "gibps", "mibps", "gbs", "iops", "ops")


@functools.lru_cache(maxsize=4096)  # a fleet has a few dozen metric names, asked about per host and GPU
def is_performance_metric(metric):
    """Whether a figure's name carries a rate unit (``gbps``, ``iops``, ``tflops``: ``cpu_gflops_all_cores``,
    ``memory_triad_gbps``) or ends with a time unit (``_us``, ``_ms``, ``_per_s``) or says latency: only those are
    compared between hosts. Counts, temperatures (``_c``) and labels are not."""
    parts = str(metric).lower().split("_")
    return len(parts) > 1 and (any(p in RATE_UNITS for p in parts) or parts[-1] in TIME_UNITS or "latency" in parts)


@functools.lru_cache(maxsize=4096)
def lower_is_better(metric):
    """Metric names end with their unit; higher is better unless the name is a time or a latency.

    ``read_latency_us``, ``step_time_ms`` and ``allreduce_latency`` are lower-is-better;
    ``triad_gbps``, ``read_iops``, ``bf16_tflops`` and ``samples_per_s`` (a rate) are higher-is-better.
    """
    parts = metric.lower().split("_")
    if "latency" in parts:
        return True
    return len(parts) > 1 and parts[-1] in TIME_UNITS and parts[-2] != "per"


def number(value):
    """A finite float, or None for anything else (None, bools, strings, NaN, infinities)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def median(values):
    """Median of a non-empty list (sorted copy)."""
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def quantile(ordered, q):
    """Linear-interpolated quantile of an already sorted non-empty list."""
    pos = (len(ordered) - 1) * q
    low = int(math.floor(pos))
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


class Spread:
    """Centre and robust spread of one group of values; score() turns a value into a robust z."""

    __slots__ = ("n", "median", "mad", "scale", "method")

    def __init__(self, values):
        self.n = len(values)
        self.median = median(values)
        deviations = [abs(v - self.median) for v in values]
        self.mad = median(deviations)
        if self.mad > 0:
            self.scale, self.method = self.mad / MAD_SCALE, "mad"
        else:
            mean_ad = sum(deviations) / len(deviations)
            self.scale, self.method = (mean_ad * MEANAD_SCALE, "meanad") if mean_ad > 0 else (0.0, "identical")

    def score(self, value):
        """Robust z of value: 0 at the median; None when every value of the group is identical."""
        if self.scale == 0:
            return 0.0 if value == self.median else None
        return (value - self.median) / self.scale

    def describe(self):
        return {"n": self.n, "median": self.median, "mad": self.mad, "spread_method": self.method}

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Robust statistics for fleet analysis (pure). What a figure's name and unit mean is _fleet/figures.py.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Optional

# Iglewicz and Hoaglin's modified z-score: 0.6745 is the 0.75 quantile of the standard normal, so
# 0.6745 * (x - median) / MAD is comparable to a z-score on normal data.
MAD_SCALE = 0.6745
# When more than half the values are equal, MAD is 0; the mean absolute deviation scaled by
# 1.253314 (sqrt(pi / 2)) stands in for the standard deviation instead.
MEANAD_SCALE = 1.253314


def median(values: Sequence[float]) -> float:
    """Median of a non-empty list (sorted copy)."""
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def quantile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of an already sorted non-empty list."""
    pos = (len(ordered) - 1) * q
    low = int(math.floor(pos))
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


class Spread:
    """Centre and robust spread of one group of values; score() turns a value into a robust z."""

    __slots__ = ("n", "median", "mad", "scale", "method")

    def __init__(self, values: Sequence[float]) -> None:
        self.n = len(values)
        self.median = median(values)
        deviations = [abs(v - self.median) for v in values]
        self.mad = median(deviations)
        if self.mad > 0:
            self.scale, self.method = self.mad / MAD_SCALE, "mad"
        else:
            mean_ad = sum(deviations) / len(deviations)
            self.scale, self.method = (mean_ad * MEANAD_SCALE, "meanad") if mean_ad > 0 else (0.0, "identical")

    def score(self, value: float) -> Optional[float]:
        """Robust z of value: 0 at the median; None when every value of the group is identical."""
        if self.scale == 0:
            return 0.0 if value == self.median else None
        return (value - self.median) / self.scale

    def describe(self) -> dict[str, object]:
        return {"n": self.n, "median": self.median, "mad": self.mad, "spread_method": self.method}


def tail_scale(ordered: Sequence[float], centre: float, q: float, upper: bool = True) -> Optional[float]:
    """The spread that a tail of a sorted group implies: how far its q quantile (its 1 - q quantile when not
    ``upper``) lies from ``centre``, over the standard normal's q quantile (2.326 at 0.99). On Gaussian data it is
    the standard deviation, as MAD / 0.6745 is; on heavy-tailed data it is larger, while the MAD (which reads the
    middle half) is not. None for a group too small to have a value beyond the quantile (fewer than 1 / (1 - q))."""
    if not 0.5 < q < 1.0 or len(ordered) * (1.0 - q) < 1.0:
        return None
    beyond = quantile(ordered, q) - centre if upper else centre - quantile(ordered, 1.0 - q)
    return max(0.0, beyond) / NormalDist().inv_cdf(q)

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Small statistics and the shared shape of a benchmark outcome.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import math

OK = "ok"
FALLBACK = "fallback"  # measured, but with a lower-fidelity method (labelled in "method")
SKIPPED = "skipped"
FAILED = "error"


class BenchError(Exception):
    """A benchmark could not measure: its outcome becomes status "error" with this message."""


class BenchTimeout(BenchError):
    """A benchmark ran past its timeout."""


def outcome(status, message=None, **figures):
    """What every benchmark returns: status, one-line message, then its figures (units in the names)."""
    out = {"status": status, "message": message}
    out.update(figures)
    return out


def mean(values):
    values = list(values)
    return sum(values) / len(values) if values else None


def stdev(values):
    values = list(values)
    if len(values) < 2:
        return 0.0 if values else None
    avg = mean(values)
    return math.sqrt(sum((v - avg) ** 2 for v in values) / (len(values) - 1))


def cv(values):
    """Coefficient of variation (stdev / mean); None when undefined."""
    avg = mean(values)
    return None if not avg else stdev(values) / avg


def percentile(sorted_values, pct):
    """Linear-interpolated percentile of an already sorted list (pct in 0..100)."""
    if not sorted_values:
        return None
    rank = (len(sorted_values) - 1) * (pct / 100.0)
    low = int(math.floor(rank))
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low)


def rounded(value, digits=3):
    return None if value is None else round(float(value), digits)

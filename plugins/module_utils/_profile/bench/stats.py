# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Small statistics and the shared shape of a benchmark outcome (its status words: _status.BENCH_*).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import math
from collections.abc import Iterable, Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import worker as _worker

# A progress callback: progress(step, done, total[, unit]) (RunLog.progress_reporter makes one).
Progress = _worker.Progress

# A benchmark could not measure: its outcome becomes status "error" with this message. The worker runner
# (_host.measure.worker) raises these very classes, so one except clause covers a benchmark and its worker.
BenchError = _worker.WorkerError
BenchTimeout = _worker.WorkerTimeout  # a benchmark (or its worker) ran past its timeout


def outcome(status: str, message: Optional[str] = None, **figures: Any) -> dict[str, Any]:
    """What every benchmark returns: status, one-line message, then its figures (units in the names)."""
    out: dict[str, Any] = {"status": status, "message": message}
    out.update(figures)
    return out


def mean(values: Iterable[float]) -> Optional[float]:
    items = list(values)
    return sum(items) / len(items) if items else None


def stdev(values: Iterable[float]) -> Optional[float]:
    items = list(values)
    if len(items) < 2:
        return 0.0 if items else None
    avg = sum(items) / len(items)
    return math.sqrt(sum((v - avg) ** 2 for v in items) / (len(items) - 1))


def cv(values: Sequence[float]) -> Optional[float]:
    """Coefficient of variation (stdev / mean); None when undefined."""
    avg = mean(values)
    spread = stdev(values)
    return None if not avg or spread is None else spread / avg


def percentile(sorted_values: Sequence[float], pct: float) -> Optional[float]:
    """Linear-interpolated percentile of an already sorted list (pct in 0..100)."""
    if not sorted_values:
        return None
    rank = (len(sorted_values) - 1) * (pct / 100.0)
    low = int(math.floor(rank))
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low)


def rounded(value: Optional[float], digits: int = 3) -> Optional[float]:
    return None if value is None else round(float(value), digits)

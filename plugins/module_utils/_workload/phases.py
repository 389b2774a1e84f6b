# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Per-iteration phase timing for training scripts, and its summary.

Standard library only, and usable outside Ansible: ``continuum.hydra.workload`` puts a copy of this file on the
run's PYTHONPATH as ``hydra_phases`` and names the JSON-lines file in ``HYDRA_PHASES_FILE``; any script may
also load this file by path. In a script::

    import hydra_phases as phases

    for batch in loader:
        with phases.step():                # one iteration
            with phases.phase("data"):
                x, y = next_batch()
            with phases.phase("forward"):
                loss = model(x, y)
            with phases.phase("backward"):
                loss.backward()

``@phases.timed("optimizer")`` does the same for a function. Without ``HYDRA_PHASES_FILE`` nothing is written.
Each record is one line: ``{"phase": NAME, "step": N, "s": SECONDS}``; a step's own line has ``"phase": null``
(the whole iteration). GPU work is asynchronous: call your framework's synchronise inside a phase to time it.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import contextlib
import functools
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any, Callable, Optional

ENV_VAR = "HYDRA_PHASES_FILE"


class Recorder:
    """Writes phase and step records to a JSON-lines file (or nowhere when path is empty)."""

    def __init__(self, path: Optional[str] = None, clock: Callable[[], float] = time.perf_counter) -> None:
        self.path = path
        self.clock = clock
        self.step_index = 0
        self._handle: Optional[IO[str]] = None
        self._lock = threading.Lock()

    def _write(self, record: dict[str, Any]) -> None:
        if not self.path:
            return
        with self._lock:
            if self._handle is None:
                self._handle = open(self.path, "a", buffering=1)
            self._handle.write(json.dumps(record) + "\n")

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = self.clock()
        try:
            yield
        finally:
            self._write({"phase": str(name), "step": self.step_index, "s": self.clock() - start})

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        start = self.clock()
        try:
            yield
        finally:
            self._write({"phase": None, "step": self.step_index, "s": self.clock() - start})
            self.step_index += 1

    def timed(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                with self.phase(name):
                    return func(*args, **kwargs)
            return wrapper
        return decorate

    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None


_DEFAULT: dict[str, Recorder] = {}


def recorder() -> Recorder:
    """The process-wide recorder writing to $HYDRA_PHASES_FILE (created on first use)."""
    if "r" not in _DEFAULT:
        _DEFAULT["r"] = Recorder(os.environ.get(ENV_VAR) or None)
    return _DEFAULT["r"]


def phase(name: str) -> Any:
    """Context manager timing one phase of the current step."""
    return recorder().phase(name)


def step() -> Any:
    """Context manager around one whole iteration; phases inside it belong to it."""
    return recorder().step()


def timed(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator timing each call of a function as phase ``name``."""
    return recorder().timed(name)


# ---------------------------------------------------------------------------------------------
# Summary (the module's side)


def _percentile(values: list[float], fraction: float) -> float:
    """Linear-interpolated percentile of a non-empty list."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def parse_lines(lines: Iterable[str]) -> tuple[list[dict[str, Any]], int]:
    """(records, unreadable line count) of a phases file's lines."""
    records: list[dict[str, Any]] = []
    bad = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            seconds = float(record["s"])
        except (ValueError, KeyError, TypeError):
            bad += 1
            continue
        if not isinstance(record, dict) or (record.get("phase") is not None and not isinstance(record["phase"], str)):
            bad += 1
            continue
        records.append({"phase": record.get("phase"), "step": record.get("step"), "s": seconds})
    return records, bad


def summarise(records: list[dict[str, Any]], skip_steps: int = 0) -> Optional[dict[str, Any]]:
    """Per phase: count, median, p95 and total seconds and share of step time; the dominant phase. None when empty.

    ``skip_steps`` leaves out the first steps (warm-up). A phase's share is its total time over the total time of
    the steps it ran in; without step records, over the sum of all phases.
    """
    kept = [r for r in records if not isinstance(r.get("step"), int) or r["step"] >= skip_steps]
    steps = [r["s"] for r in kept if r["phase"] is None]
    by_phase: dict[str, list[float]] = {}
    for record in kept:
        if record["phase"] is not None:
            by_phase.setdefault(record["phase"], []).append(record["s"])
    if not by_phase and not steps:
        return None
    denominator = sum(steps) if steps else sum(sum(values) for values in by_phase.values())
    phases: dict[str, dict[str, Any]] = {}
    for name, values in by_phase.items():
        phases[name] = {
            "count": len(values),
            "median_s": round(_percentile(values, 0.5), 6),
            "p95_s": round(_percentile(values, 0.95), 6),
            "total_s": round(sum(values), 6),
            "share": round(sum(values) / denominator, 4) if denominator > 0 else None,
        }
    dominant = max(phases, key=lambda name: phases[name]["total_s"]) if phases else None
    return {
        "steps": len(steps),
        "step_median_s": round(_percentile(steps, 0.5), 6) if steps else None,
        "step_p95_s": round(_percentile(steps, 0.95), 6) if steps else None,
        "phases": phases,
        "dominant": dominant,
        "unaccounted_share": round(1 - sum(p["total_s"] for p in phases.values()) / denominator, 4)
        if steps and denominator > 0 else None,
    }

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The JSONL run log of a profile run: one line per phase, progress tick and event.

A module cannot stream to the Ansible terminal, so progress of long runs goes
here: ``tail -f`` the file while the task runs. Each line is flushed as it is
written; the log is appended to, never rewritten, so it cannot be written
atomically (a reader may see a last line still being written).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import json
import time
from typing import IO, Any, Callable, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._atomic import open_log


class RunLog:
    """Append-only JSONL events; a RunLog without a path only keeps the phase records."""

    def __init__(self, path: Optional[str] = None, progress_every_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._start = clock()
        self._progress_every_s = progress_every_s
        self._handle: Optional[IO[str]] = None
        self.phases: list[dict[str, Any]] = []
        if path:
            try:
                self._handle = open_log(path)  # 0600, no symlink followed, no FIFO
            except OSError as exc:
                raise ValueError("run_log: cannot open %s for appending: %s" % (path, exc.strerror or exc)) from exc

    def event(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {
            "ts": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "elapsed_s": round(self._clock() - self._start, 3),
            "event": event,
        }
        record.update(fields)
        if self._handle is not None:
            self._handle.write(json.dumps(record, sort_keys=True, default=str) + "\n")
        return record

    def phase_start(self, phase: str, **fields: Any) -> dict[str, Any]:
        return self.event("phase_start", phase=phase, **fields)

    def phase_end(self, phase: str, status: str, **fields: Any) -> dict[str, Any]:
        record = self.event("phase_end", phase=phase, status=status, **fields)
        self.phases.append({"phase": phase, "status": status, "elapsed_s": record["elapsed_s"]})
        return record

    def progress_reporter(self, phase: str) -> Callable[..., None]:
        """A callable(step, done, total, unit="s") that writes at most one progress line per interval."""
        state: dict[str, Optional[float]] = {"last": None}

        def report(step: str, done: float, total: float, unit: str = "s") -> None:
            now = self._clock()
            last = state["last"]
            if last is not None and now - last < self._progress_every_s:
                return
            state["last"] = now
            self.event("progress", phase=phase, step=step, done=round(done, 2), total=round(total, 2), unit=unit)
        return report

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

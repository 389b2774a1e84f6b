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


class RunLog:
    """Append-only JSONL events; a RunLog without a path only keeps the phase records."""

    def __init__(self, path=None, progress_every_s=1.0, clock=time.monotonic):
        self.path = path
        self._clock = clock
        self._start = clock()
        self._progress_every_s = progress_every_s
        self._handle = None
        self.phases = []
        if path:
            try:
                self._handle = open(path, "a", buffering=1)
            except OSError as exc:
                raise ValueError("run_log: cannot open %s for appending: %s" % (path, exc.strerror or exc)) from exc

    def event(self, event, **fields):
        record = {
            "ts": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "elapsed_s": round(self._clock() - self._start, 3),
            "event": event,
        }
        record.update(fields)
        if self._handle is not None:
            self._handle.write(json.dumps(record, sort_keys=True, default=str) + "\n")
        return record

    def phase_start(self, phase, **fields):
        return self.event("phase_start", phase=phase, **fields)

    def phase_end(self, phase, status, **fields):
        record = self.event("phase_end", phase=phase, status=status, **fields)
        self.phases.append({"phase": phase, "status": status, "elapsed_s": record["elapsed_s"]})
        return record

    def progress_reporter(self, phase):
        """A callable(step, done, total, unit="s") that writes at most one progress line per interval."""
        state = {"last": None}

        def report(step, done, total, unit="s"):
            now = self._clock()
            if state["last"] is not None and now - state["last"] < self._progress_every_s:
                return
            state["last"] = now
            self.event("progress", phase=phase, step=step, done=round(done, 2), total=round(total, 2), unit=unit)
        return report

    def close(self):
        if self._handle is not None:
            self._handle.close()
            self._handle = None

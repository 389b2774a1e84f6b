# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Run a self-contained worker module in a child Python, with a timeout, and read its JSON answer.

Workers (profile's cpu_worker, stream.py, torch_worker.py) import only the standard library at the top, so
their source can run as ``python -c SOURCE ARGS_JSON`` in any interpreter (the module's own, or a training
virtualenv's for torch) and with its own environment (BLAS thread counts are fixed when a BLAS loads). The
source comes from the imported module (inspect works inside the AnsiballZ zip).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import inspect
import json
import os
import subprocess
import sys
import time
from types import ModuleType
from typing import Any, Callable, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import signal_group

# A progress callback: progress(step, done, total[, unit]) (profile's RunLog.progress_reporter makes one).
Progress = Callable[..., None]


class WorkerError(Exception):
    """A worker could not measure: it failed to start, crashed, or printed no JSON answer."""


class WorkerTimeout(WorkerError):
    """A worker ran past its timeout (and was killed with its process group)."""


def start_worker(module: ModuleType, args: dict[str, Any], python: Optional[str] = None,
                 env: Optional[dict[str, str]] = None) -> "subprocess.Popen[bytes]":
    """Start the worker and return the Popen (its own process group, LANG=C)."""
    child_env = dict(os.environ, LANG="C", LC_ALL="C")
    child_env.update(env or {})
    argv = [python or sys.executable, "-c", inspect.getsource(module), json.dumps(args)]
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=child_env, start_new_session=True)
    except OSError as exc:
        raise WorkerError("cannot start %s: %s" % (argv[0], exc.strerror or exc)) from exc


def kill_group(proc: "subprocess.Popen[bytes]") -> None:
    """SIGKILL the worker's process group (command.signal_group) and collect what it wrote."""
    signal_group(proc.pid)
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def finish_worker(proc: "subprocess.Popen[bytes]", timeout_s: float, label: str, progress: Optional[Progress] = None,
                  step_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Wait for the worker (reporting progress every step), kill it past the timeout, parse its last line."""
    start = clock()
    while True:
        remaining = timeout_s - (clock() - start)
        if remaining <= 0:
            kill_group(proc)
            raise WorkerTimeout("%s timed out after %gs" % (label, timeout_s))
        try:
            stdout, stderr = proc.communicate(timeout=min(step_s, remaining))
            break
        except subprocess.TimeoutExpired:
            if progress is not None:
                progress(label, clock() - start, timeout_s)
    return parse_answer(proc.returncode, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"), label)


def parse_answer(returncode: Optional[int], stdout: str, stderr: str, label: str) -> dict[str, Any]:
    """The worker's JSON answer (its last stdout line); WorkerError naming the failure otherwise."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if returncode != 0:
        last = ([line for line in stderr.splitlines() if line.strip()] or ["no error output"])[-1]
        raise WorkerError("%s exited with status %s: %s" % (label, returncode, last.strip()))
    if not lines:
        raise WorkerError("%s printed no result" % label)
    try:
        answer = json.loads(lines[-1])
    except ValueError:
        raise WorkerError("%s printed no JSON result: %r" % (label, lines[-1][:200])) from None
    if not isinstance(answer, dict):
        raise WorkerError("%s printed %r, not a JSON object" % (label, lines[-1][:200]))
    return answer


def run_worker(module: ModuleType, args: dict[str, Any], timeout_s: float, label: str, python: Optional[str] = None,
               env: Optional[dict[str, str]] = None, progress: Optional[Progress] = None) -> dict[str, Any]:
    return finish_worker(start_worker(module, args, python=python, env=env), timeout_s, label, progress=progress)

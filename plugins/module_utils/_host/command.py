# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Running external commands for probes: argument lists, LANG=C, a timeout, always.

Every command runs in its own session (process group); at its deadline the whole group is killed, so a
grandchild that ignores SIGTERM or keeps the pipes open cannot outlive the probe. call_with_timeout()
bounds an in-process call (NVML, statvfs, a read that can block) the same way.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, TypeVar, Union, cast

T = TypeVar("T")


class ProbeError(Exception):
    """A probe could not read what it reads; its checks become ERROR with this reason."""


class ProbeAbsent(Exception):
    """What a probe reads does not exist on this host; its checks become SKIP with this reason."""


def find_binary(name: str, override: Optional[str] = None) -> Optional[str]:
    """Absolute path of a binary, from an explicit override or PATH; None when absent."""
    if override:
        return override if os.access(override, os.X_OK) else None
    return shutil.which(name)


def run(argv: Sequence[str], timeout: float, env: Optional[Mapping[str, str]] = None,
        input_text: Optional[str] = None) -> tuple[int, str, str]:
    """Run argv and return (rc, stdout, stderr) as text.

    Raises ProbeError on timeout or when the binary cannot be executed, naming
    the command: a probe never hangs and never passes silently.
    """
    # LANG=C: output is parsed, so it must not be translated or localised.
    child_env = dict(os.environ, LANG="C", LC_ALL="C")
    child_env.update(env or {})
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env,
            start_new_session=True,  # so a timeout kills the whole process group
        )
    except FileNotFoundError:
        raise ProbeAbsent("%s: not found" % argv[0]) from None
    except PermissionError:
        raise ProbeError("%s: permission denied" % argv[0]) from None
    except OSError as exc:
        raise ProbeError("%s: cannot execute (%s)" % (argv[0], exc)) from None
    try:
        stdout, stderr = proc.communicate(input=input_text.encode() if input_text is not None else None, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ProbeError("%s timed out after %ss" % (" ".join(argv), _fmt_seconds(timeout))) from None
    return proc.returncode, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace")


def call_with_timeout(call: Callable[[], T], timeout: float, what: str) -> T:
    """Run an in-process call with a deadline: NVML on a hung GPU, or statvfs on a hung network mount, can block forever.

    The call runs in a daemon thread; past the deadline ProbeError names it, and the stuck thread cannot keep the
    module alive.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except Exception as exc:  # pylint: disable=broad-exception-caught
            outcome["error"] = exc

    worker = threading.Thread(target=target, name="hydra-%s" % what)
    worker.daemon = True
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise ProbeError("%s timed out after %ss" % (what, _fmt_seconds(timeout)))
    if "error" in outcome:
        raise outcome["error"]
    return cast(T, outcome.get("value"))


def _kill_group(proc: "subprocess.Popen[bytes]") -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _fmt_seconds(value: Union[int, float]) -> str:
    return ("%g" % value) if isinstance(value, float) else str(value)


# The deadline of a quick command (timedatectl, systemctl, nvcc --version, statvfs) when the caller names none;
# doctor's and profile's ``timeouts.command`` default.
DEFAULT_COMMAND_TIMEOUT = 10

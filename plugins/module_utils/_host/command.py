# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Running external commands for probes: argument lists, LANG=C, a timeout, always.

Every command runs in its own session (process group); at its deadline the whole group is killed, so a
grandchild that ignores SIGTERM or keeps the pipes open cannot outlive the probe. A grandchild that left the
group with setsid(2) is killed too: on Linux the module makes itself a child subreaper (prctl
PR_SET_CHILD_SUBREAPER), so an orphaned descendant is reparented to the module instead of init, and at the
deadline every process found through /proc/<pid>/stat (parent chain, process group, session) is killed and
reaped. Without prctl the tree is still walked before anything is killed. call_with_timeout() bounds an
in-process call (NVML, statvfs, a read that can block) the same way.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Callable, Optional, TypeVar, Union, cast

T = TypeVar("T")


class ProbeError(Exception):
    """A probe could not read what it reads; its checks become ERROR with this reason."""


class ProbeAbsent(Exception):
    """What a probe reads does not exist on this host; its checks become SKIP with this reason."""


class CallTimedOut(ProbeError):
    """call_with_timeout's deadline passed; ``what`` names the call (the stuck thread is left behind)."""

    def __init__(self, what: str, message: str) -> None:
        super().__init__(message)
        self.what = what


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
    with _started(argv, stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env) as proc:
        try:
            stdout, stderr = proc.communicate(input=input_text.encode() if input_text is not None else None, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            raise ProbeError("%s timed out after %ss" % (" ".join(argv), _fmt_seconds(timeout))) from None
    return proc.returncode, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace")


@contextlib.contextmanager
def _started(argv: Sequence[str], **popen: Any) -> Iterator["subprocess.Popen[bytes]"]:
    """A child in its own session, so that a timeout kills its whole process group, known to the module's exit
    cleanup while it runs. What cannot be executed is ProbeAbsent (not found) or ProbeError naming argv[0]."""
    become_subreaper()
    try:
        proc = subprocess.Popen(argv, start_new_session=True, **popen)
    except FileNotFoundError:
        raise ProbeAbsent("%s: not found" % argv[0]) from None
    except PermissionError:
        raise ProbeError("%s: permission denied" % argv[0]) from None
    except OSError as exc:
        raise ProbeError("%s: cannot execute (%s)" % (argv[0], exc)) from None
    with _LIVE_LOCK:
        _LIVE.add(proc.pid)
    try:
        yield proc
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(proc.pid)


def run_to_file(argv: Sequence[str], timeout: Optional[float], log_path: str, cwd: Optional[str] = None,
                env: Optional[Mapping[str, str]] = None) -> tuple[Optional[int], bool]:
    """Run argv with stdout and stderr streamed into log_path (appended); return (rc, timed_out).

    For long jobs whose output is kept rather than parsed: ``env`` is the child's whole environment (None: this
    process's), not localised. ``timeout`` None or <= 0 means no deadline; at the deadline the whole process tree
    is killed as in run() and rc is None. ProbeAbsent/ProbeError when argv[0] cannot be executed.
    """
    child_env = dict(env) if env is not None else None
    with open(log_path, "ab") as log, _started(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                               cwd=cwd, env=child_env) as proc:
        try:
            rc = proc.wait(timeout=timeout if timeout and timeout > 0 else None)
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            return None, True
        # The script is done; a background child it left in its process group must not outlive it.
        signal_group(proc.pid)
    return rc, False


def signal_group(pgid: int, sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` to a process group (a command started in its own session: its pid); False when none is left."""
    try:
        os.killpg(pgid, sig)
    except OSError:
        return False
    return True


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
        raise CallTimedOut(what, "%s timed out after %ss" % (what, _fmt_seconds(timeout)))
    if "error" in outcome:
        raise outcome["error"]
    return cast(T, outcome.get("value"))


# prctl(2) option: orphaned descendants are reparented to this process instead of init.
_PR_SET_CHILD_SUBREAPER = 36
_SUBREAPER: dict[str, bool] = {}
# pids of the commands run() is waiting for now: a process adopted by this one that is not among them is an
# orphaned descendant of a command, never a command another thread still waits for.
_LIVE: set[int] = set()
_LIVE_LOCK = threading.Lock()


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux >= 3.4), once; False where that is not available (no error)."""
    if "done" not in _SUBREAPER:
        _SUBREAPER["done"] = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes  # pylint: disable=import-outside-toplevel
                libc = ctypes.CDLL(None, use_errno=True)
                _SUBREAPER["done"] = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            except (OSError, AttributeError, TypeError):
                pass
    return _SUBREAPER["done"]


# pid -> (state, ppid, process group, session, start time in clock ticks after boot)
ProcStat = tuple[str, int, int, int, int]
ProcessTable = Mapping[int, ProcStat]


def parse_pid_stat(text: str) -> Optional[ProcStat]:
    """/proc/<pid>/stat -> (state, ppid, process group, session, start time in clock ticks after boot); None when the
    text is not one (truncated, or not numbers where they belong)."""
    # "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses, so split after the last ")".
    if ")" not in text:
        return None
    fields = text.rpartition(")")[2].split()
    try:
        return fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])
    except (IndexError, ValueError):
        return None


def process_table(proc_dir: str = "/proc") -> dict[int, ProcStat]:
    """pid -> (state, ppid, process group, session, start time) of every process, from /proc/<pid>/stat; empty without /proc."""
    table: dict[int, ProcStat] = {}
    try:
        names = os.listdir(proc_dir)
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(proc_dir, name, "stat"), "rb") as handle:
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            continue  # exited meanwhile
        entry = parse_pid_stat(text)
        if entry is not None:
            table[int(name)] = entry
    return table


def descendants(pid: int, table: ProcessTable) -> set[int]:
    """pid, the members of its process group and session, everything below them, and the orphans this process
    adopted as subreaper (a setsid'd grandchild whose parent died): children of this process started after the
    command that no other running command owns."""
    me = os.getpid()
    with _LIVE_LOCK:
        others = set(_LIVE) - {pid}
    found = {pid}
    started = table[pid][4] if pid in table else None
    for other, (_state, ppid, pgrp, session, start) in table.items():
        adopted = ppid == me and other not in others and started is not None and start >= started
        if pgrp == pid or session == pid or adopted:
            found.add(other)
    children: dict[int, list[int]] = {}
    for other, (_state, ppid, _pgrp, _session, _start) in table.items():
        children.setdefault(ppid, []).append(other)
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    found.discard(me)
    return found - others


def _kill_tree(proc: "subprocess.Popen[bytes]") -> None:
    """SIGKILL the command and every descendant (walked before anything dies, again until none is left), then reap."""
    adopted: set[int] = set()
    for _attempt in range(10):
        table = process_table()
        victims = {p for p in descendants(proc.pid, table) if p in table and table[p][0] not in ("Z", "X")}
        if not table:
            victims = {proc.pid}  # no /proc: the process group is all there is to kill
        adopted.update(p for p in victims if p != proc.pid)
        signal_group(proc.pid)
        for victim in victims:
            try:
                os.kill(victim, signal.SIGKILL)
            except OSError:
                pass
        if not victims:
            break
        time.sleep(0.01)
    try:
        proc.communicate(timeout=2)
    except subprocess.TimeoutExpired:
        pass  # a process stuck in the kernel (D state) holds the pipes; it dies when its I/O returns
    _reap(adopted)


def _reap(pids: set[int], wait_s: float = 1.0) -> None:
    """Collect the exit status of killed processes this process adopted, so none is left as a zombie."""
    pending = set(pids)
    until = time.monotonic() + wait_s
    while pending:
        for pid in list(pending):
            try:
                done, _status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pending.discard(pid)  # not our child (its parent reaps it), or reaped already
                continue
            except OSError:
                pending.discard(pid)
                continue
            if done:
                pending.discard(pid)
        if not pending or time.monotonic() > until:
            break
        time.sleep(0.01)


def _fmt_seconds(value: Union[int, float]) -> str:
    return ("%g" % value) if isinstance(value, float) else str(value)


# The deadline of a quick command (timedatectl, systemctl, nvcc --version, statvfs) when the caller names none;
# doctor's and profile's ``timeouts.command`` default.
DEFAULT_COMMAND_TIMEOUT = 10

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The controller's state files (the findings store, the history snapshots): read with a deadline, and changed
under a lock.

Two runs can share a report directory (a scheduled and a manual run, the merge run of AWX slices) and
``playbooks/acknowledge.yml`` can run while a doctor run ends: each read-modify-write of the store or of the
history holds ``locked(<file>)`` - ``fcntl.flock`` on ``<file>.lock`` beside it, polled without blocking until a
deadline, so a run never waits forever on another (a held lock is released when its holder exits, however it
exits). The lock file is left in place: removing it would let a third run lock a different file.

``read_text`` refuses what is not a regular file (a FIFO would block the open, a device the read) and bounds the
read itself with a deadline (a file on a hung network mount); ``read_lines`` does the same a line at a time, the
deadline on each line (a file of gigabytes, such as the merged hosts of a sliced run, is not read in one deadline;
a mount that stops answering is still given up on); ``locked`` creates the lock file, and ``list_dir``
lists a directory, within a deadline too: every call that touches the state directory ends. ``json_text`` is how the controller's JSON files are
written: in pieces, never as one string (the findings store of a 100,000-host fleet is hundreds of MB of text, and
``json.dumps`` with an indent holds every small piece of it in a list before joining them).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import contextlib
import datetime
import fcntl
import json
import os
import queue
import stat
import threading
import time
from collections.abc import Iterator
from typing import Any, Callable, Optional, TextIO, TypeVar

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import CallTimedOut, call_with_timeout

T = TypeVar("T")
LOCK_SUFFIX = ".lock"
# How long a run waits for another to finish with a state file (the callback's state_lock_timeout default).
DEFAULT_LOCK_WAIT_S = 60.0
LOCK_POLL_S = 0.1
READ_TIMEOUT_S = 30.0
# The least time locked() gives the file system to create the lock file, whatever the lock wait (0 included).
LOCK_FILE_MIN_S = 1.0
PIECE_CHARS = 1 << 16  # json_text's pieces: about this many characters each
LINES_AHEAD = 64  # read_lines: lines read ahead of the caller (a merged host's line is ~50 KB)
_END = object()


class StateFileError(OSError):
    """A state file that cannot be used: not a regular file, or its read passed the deadline."""


class ReadTimedOut(StateFileError):
    """A call on a state file or its directory (the read, the listing, creating the lock file) did not finish by its
    deadline, as on a hung network mount: the file is left as it is (moving it could hang too)."""


class Locked(StateFileError):
    """Another run held the lock for the whole wait: nothing was read or written."""


def lock_path(path: str) -> str:
    return path + LOCK_SUFFIX


def _bounded(call: Callable[[], T], timeout: float, what: str) -> T:
    """call() within ``timeout`` seconds (in a thread: a call on a hung mount blocks for ever); ReadTimedOut past it."""
    try:
        return call_with_timeout(call, timeout, what)
    except CallTimedOut as exc:
        raise ReadTimedOut(str(exc)) from None


def list_dir(directory: str, timeout: float = READ_TIMEOUT_S) -> list[str]:
    """os.listdir(directory) within ``timeout`` seconds: ReadTimedOut past it, other OSErrors as they come."""
    return _bounded(lambda: os.listdir(directory), timeout, "listing %s" % directory)


def _regular(fd: int, path: str) -> None:
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise StateFileError("%s is %s" % (path, kind))


@contextlib.contextmanager
def locked(path: str, wait_s: float = DEFAULT_LOCK_WAIT_S, poll_s: float = LOCK_POLL_S) -> Iterator[None]:
    """Hold the exclusive lock of ``path`` (its ``.lock`` file, created 0600 beside it) for the ``with`` block.

    Locked, naming the lock file and the wait, when another process holds it for ``wait_s`` seconds; StateFileError
    when the lock file is not a regular file (it is opened without following a symlink or blocking on a FIFO);
    ReadTimedOut when its directory or the file cannot be created within the wait (at least LOCK_FILE_MIN_S)."""
    where = lock_path(path)
    deadline = time.monotonic() + max(0.0, wait_s)

    def create() -> int:
        os.makedirs(os.path.dirname(os.path.abspath(where)), exist_ok=True)
        return os.open(where, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    fd = _bounded(create, max(wait_s, LOCK_FILE_MIN_S), "creating the lock file %s" % where)
    try:
        _regular(fd, where)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Locked("%s is locked by another run; gave up after %g s" % (where, wait_s)) from None
                time.sleep(min(poll_s, left))
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _open_text(path: str) -> TextIO:
    """A regular file opened for UTF-8 text (O_NONBLOCK: opening a FIFO does not wait for a writer); StateFileError
    when it is not a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        _regular(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, encoding="utf-8")


def read_text(path: str, timeout: float = READ_TIMEOUT_S) -> str:
    """The UTF-8 text of a regular file. FileNotFoundError when missing; StateFileError when it is not a regular
    file; ReadTimedOut past ``timeout`` seconds; other OSErrors and UnicodeDecodeError as they come."""
    def read() -> str:
        with _open_text(path) as handle:
            return handle.read()
    return _bounded(read, timeout, "read(%s)" % path)


def read_lines(path: str, timeout: float = READ_TIMEOUT_S) -> Iterator[str]:
    """The lines of a regular UTF-8 file as read_text reads it, a few at a time: the whole text is never held (the
    merged hosts of 100,000 hosts are ~5 GB of it). The reading runs in a thread; each line must come within
    ``timeout`` seconds of the one before (ReadTimedOut: a hung mount). Errors as read_text's, when they come."""
    ahead: queue.Queue[Any] = queue.Queue(maxsize=LINES_AHEAD)
    stop = threading.Event()

    def offer(item: Any) -> bool:
        while not stop.is_set():  # a caller that stopped reading never takes the item: give up then
            try:
                ahead.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            with _open_text(path) as handle:
                for line in handle:
                    if not offer(line):
                        return
            offer(_END)
        except Exception as exc:  # pylint: disable=broad-exception-caught
            offer(exc)

    threading.Thread(target=read, name="hydra-read(%s)" % path, daemon=True).start()
    try:
        while True:
            try:
                item = ahead.get(timeout=timeout)
            except queue.Empty:
                raise ReadTimedOut("read(%s) timed out after %gs" % (path, timeout)) from None
            if item is _END:
                return
            if isinstance(item, Exception):
                raise item
            yield item
    finally:
        stop.set()


def parse_time(text: Any) -> Optional[datetime.datetime]:
    """A time a state file keeps (ISO 8601; UTC when it names no zone) as an aware datetime; None when it is not one."""
    try:
        when = datetime.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


def json_text(value: Any, indent: int = 1) -> Iterator[str]:
    """``json.dumps(value, indent=indent, sort_keys=True) + "\\n"`` in pieces of about PIECE_CHARS characters (the
    same text: write_atomic writes them as they come)."""
    pieces: list[str] = []
    size = 0
    for piece in json.JSONEncoder(indent=indent, sort_keys=True).iterencode(value):
        pieces.append(piece)
        size += len(piece)
        if size >= PIECE_CHARS:
            yield "".join(pieces)
            pieces, size = [], 0
    pieces.append("\n")
    yield "".join(pieces)

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Atomic file writes: a reader sees the old file or the new one, never half of one; and open_log(), the one way a
run log (appended to line by line, so never written atomically) is opened.

A write that is interrupted (the controller killed between the temp file and the rename) leaves its temp
file, ``.<name>.<random>.tmp``, behind. Each write first removes such files of its own directory that are
older than STALE_SECONDS: only names of that shape, only regular files, so another writer's fresh temp
file is never taken from under it.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import errno
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterable
from typing import IO, Optional, Union

STALE_SECONDS = 120.0
# mkstemp's random part is 8 characters of [a-z0-9_]
_TEMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")


def remove_stale_temp_files(directory: str, older_than: float = STALE_SECONDS, now: Optional[float] = None) -> list[str]:
    """Delete the temp files of interrupted write_atomic() calls in directory that were last modified more
    than ``older_than`` seconds ago; returns their paths. Errors (a file already gone, no permission) are
    ignored: the cleanup must never fail a write."""
    now = time.time() if now is None else now
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        if not _TEMP_NAME.match(name):
            continue
        path = os.path.join(directory, name)
        try:
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode) and now - info.st_mtime > older_than:
                os.unlink(path)
                removed.append(path)
        except OSError:
            continue
    return removed


def write_atomic(path: Union[str, os.PathLike[str]], text: Union[str, Iterable[str]], mode: int = 0o644) -> None:
    """Write text (a string, or an iterable of strings written as they come) to path via a temp file in the
    same directory, fsync and rename (stale temp files of that directory removed first)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    remove_stale_temp_files(directory)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        # errors="replace": a stray surrogate in a host-supplied string must not lose the whole file
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as handle:
            if isinstance(text, str):
                handle.write(text)
            else:
                for chunk in text:
                    handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def open_log(path: str) -> IO[str]:
    """A run log opened for appending, line-buffered: created 0600 (its events may name models, paths, errors), never
    through a symbolic link at its own name (O_NOFOLLOW: a link planted there would send the log into the file it
    points at), never blocking (a FIFO), and only when it is a regular file. OSError otherwise, its strerror one
    phrase for the caller's one line ("it is a symbolic link (not followed)", "not a regular file")."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.ENXIO and os.path.islink(path)):
            raise OSError(errno.ELOOP, "it is a symbolic link (not followed)", path) from None
        if exc.errno == errno.ENXIO:  # a FIFO no one reads
            raise OSError(errno.EINVAL, "not a regular file", path) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "a", buffering=1, encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise

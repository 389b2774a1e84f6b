# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Reading small files (/proc, /sys, state files): one reader per missing-file policy, each able to take a deadline.

=========================  ===================  ==========================================
reader                     missing              unreadable (permission, binary, I/O error)
=========================  ===================  ==========================================
read_text                  ProbeAbsent          ProbeError
read_text_if_exists        None                 ProbeError
read_required_text         ProbeError           ProbeError
read_text_or_none          None                 None
read_int                   ProbeError / None    ProbeError (garbage too)
read_json_or_none          None                 None (and None for text that is not JSON)
list_dir                   ProbeError           ProbeError
=========================  ===================  ==========================================

``timeout`` (seconds, None for none) bounds a read that can block: a FIFO without a writer, a file on a hung
network mount. Past the deadline the read raises ProbeError naming the file (the or_none readers return None).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import json
import os
from typing import Any, Callable, Optional, TypeVar

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError, call_with_timeout

T = TypeVar("T")


def _bounded(call: Callable[[], T], timeout: Optional[float], what: str) -> T:
    if timeout is None:
        return call()
    return call_with_timeout(call, timeout, what)


def _read(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read()
    except (FileNotFoundError, NotADirectoryError):
        raise ProbeAbsent("%s does not exist" % path) from None
    except PermissionError:
        raise ProbeError("%s: permission denied" % path) from None
    except UnicodeDecodeError:
        raise ProbeError("%s: not a text file" % path) from None
    except OSError as exc:
        raise ProbeError("%s: %s" % (path, exc)) from None


def read_text(path: str, timeout: Optional[float] = None) -> str:
    """The file's text; ProbeAbsent when missing, ProbeError when unreadable, not text, or past the deadline."""
    return _bounded(lambda: _read(path), timeout, "read(%s)" % path)


def read_text_if_exists(path: str, timeout: Optional[float] = None) -> Optional[str]:
    """The file's text, None when missing; ProbeError when it is there but unreadable."""
    try:
        return read_text(path, timeout)
    except ProbeAbsent:
        return None


def read_required_text(path: str, timeout: Optional[float] = None) -> str:
    """A file that must exist where its directory does: missing is a broken tree (ProbeError), not absence."""
    try:
        return read_text(path, timeout)
    except ProbeAbsent:
        raise ProbeError("%s does not exist" % path) from None


def read_text_or_none(path: str, timeout: Optional[float] = None) -> Optional[str]:
    """The file's text, or None for whatever reason it cannot be read (best-effort facts)."""
    try:
        return read_text(path, timeout)
    except (ProbeAbsent, ProbeError):
        return None


def read_int(path: str, optional: bool = False, timeout: Optional[float] = None) -> Optional[int]:
    """An integer sysfs/cgroup file; None when optional and missing; ProbeError when missing otherwise, or garbage."""
    text = read_text_if_exists(path, timeout) if optional else read_required_text(path, timeout)
    if text is None:
        return None
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        raise ProbeError("%s: %r is not an integer" % (path, text[:80])) from None


def read_json_or_none(path: str, timeout: Optional[float] = None) -> Any:
    """The file's JSON value; None when missing, unreadable or not JSON."""
    text = read_text_or_none(path, timeout)
    try:
        return json.loads(text) if text is not None else None
    except ValueError:
        return None


def list_dir(directory: str, timeout: Optional[float] = None) -> list[str]:
    """The sorted entries of a directory; ProbeError naming it when it cannot be listed."""
    def listing() -> list[str]:
        try:
            return sorted(os.listdir(directory))
        except OSError as exc:
            raise ProbeError("%s: %s" % (directory, exc.strerror or exc)) from None
    return _bounded(listing, timeout, "listdir(%s)" % directory)

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import tempfile
from collections.abc import Iterable
from typing import Union


def write_atomic(path: Union[str, os.PathLike[str]], text: Union[str, Iterable[str]], mode: int = 0o644) -> None:
    """Write text (a string, or an iterable of strings written as they come) to path via a temp file in the
    same directory, fsync and rename."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
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

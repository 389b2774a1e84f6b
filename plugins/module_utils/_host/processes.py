# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The process table from /proc: who runs what, for the features that act on processes.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import pwd
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import parse_pid_stat
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text_or_none


def list_processes(proc: str = "/proc") -> list[dict[str, Any]]:
    """Every process as {pid, comm, uid, user}; one that exits while being read is left out."""
    out = []
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        comm = read_text_or_none(os.path.join(proc, name, "comm"))
        try:
            uid = os.stat(os.path.join(proc, name)).st_uid
        except OSError:
            continue  # gone meanwhile
        if comm is None:
            continue
        try:
            user = pwd.getpwuid(uid).pw_name
        except KeyError:
            user = str(uid)  # no passwd entry (a container's UID): the number is the name
        out.append({"pid": int(name), "comm": comm.strip(), "uid": uid, "user": user})
    return out


# Per-process readers (tenant.slo, tenant_guard). Each returns None when the process is gone or the file unreadable.

def stat_starttime(pid: int, proc: str = "/proc") -> Optional[int]:
    """Field 22 of /proc/<pid>/stat: start time in clock ticks after boot (a PID plus this names one process)."""
    entry = parse_pid_stat(read_text_or_none(os.path.join(proc, str(pid), "stat")) or "")
    return entry[4] if entry else None


def boot_time(proc: str = "/proc") -> Optional[float]:
    """The btime line of /proc/stat: when the machine booted, seconds since the epoch."""
    for line in (read_text_or_none(os.path.join(proc, "stat")) or "").splitlines():
        if line.startswith("btime "):
            try:
                return float(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


def cmdline(pid: int, proc: str = "/proc") -> Optional[str]:
    """/proc/<pid>/cmdline with its NULs as spaces; "" for a kernel thread, None when unreadable."""
    text = read_text_or_none(os.path.join(proc, str(pid), "cmdline"))
    return None if text is None else " ".join(part for part in text.split("\0") if part)


def cgroups(pid: int, proc: str = "/proc") -> Optional[dict[str, str]]:
    """/proc/<pid>/cgroup as {controllers: path}: "" is the v2 unified hierarchy, "blkio" or "cpu,cpuacct" v1 ones."""
    text = read_text_or_none(os.path.join(proc, str(pid), "cgroup"))
    if text is None:
        return None
    out = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            out[parts[1]] = parts[2]
    return out


def io_counters(pid: int, proc: str = "/proc") -> Optional[dict[str, int]]:
    """/proc/<pid>/io as {rchar, wchar, read_bytes, write_bytes, ...}; None when gone or not ours to read."""
    text = read_text_or_none(os.path.join(proc, str(pid), "io"))
    if text is None:
        return None
    out = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep:
            try:
                out[name.strip()] = int(value.strip())
            except ValueError:
                continue
    return out

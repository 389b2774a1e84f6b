# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Parsers of the kernel's text files: cpuinfo, meminfo (host and NUMA node), mounts / mountinfo, os-release, cpulists.

Pure functions of the file contents (the readers are in files.py); one parser per format, shared by every feature.
A parser that meets a line not in the kernel's format raises ProbeError naming it, unless its caller hands it a
lines.BadLines: the line is then skipped and counted there (one bad line never hides the others).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import re
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLine, BadLines, parse_lines

# ---------------------------------------------------------------- /proc/cpuinfo


def parse_cpuinfo(text: Optional[str]) -> dict[str, Any]:
    """/proc/cpuinfo -> the CPU facts every feature reads.

    ``model``: the first "model name" (x86, most Arm kernels); ``machine_model``: the first "Model" (the board of
    an Arm machine, e.g. a Raspberry Pi); ``vendor``: the first "vendor_id" (x86) or "CPU implementer" (Arm);
    ``flags``: the ISA flags of the first processor ("flags" on x86, "Features" on Arm); ``logical_cpus``: the
    number of "processor" blocks (None when there is none); ``hypervisor``: whether any "flags" line sets the
    hypervisor bit (a VM).
    """
    model: Optional[str] = None
    machine_model: Optional[str] = None
    vendor: Optional[str] = None
    flags: list[str] = []
    count, hypervisor = 0, False
    for line in (text or "").splitlines():
        key, _sep, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "processor":
            count += 1
        elif key == "model name":
            model = value if model is None else model
        elif key == "Model":
            machine_model = value if machine_model is None else machine_model
        elif key in ("vendor_id", "CPU implementer") and vendor is None:
            vendor = value
        if key in ("flags", "Features") and not flags:
            flags = value.split()
        if key == "flags" and " hypervisor" in " " + value:
            hypervisor = True
    return {"model": model, "machine_model": machine_model, "vendor": vendor, "flags": flags,
            "logical_cpus": count or None, "hypervisor": hypervisor}


# ---------------------------------------------------------------- meminfo


def parse_meminfo(text: Optional[str]) -> dict[str, int]:
    """/proc/meminfo, or a NUMA node's meminfo ("Node 0 MemTotal: ..."), -> {key: value in kB (a count for HugePages_*)}.

    Lines whose value is not a number are left out.
    """
    values: dict[str, int] = {}
    for line in (text or "").splitlines():
        key, _sep, rest = line.partition(":")
        parts = rest.split()
        if parts and key.split():
            try:
                values[key.split()[-1]] = int(parts[0])  # "Node 0 MemTotal" -> "MemTotal"
            except ValueError:
                continue
    return values


def meminfo_kib(text: Optional[str], key: str = "MemTotal") -> Optional[int]:
    """One meminfo value in kB, None when the text has no such (numeric) line."""
    return parse_meminfo(text).get(key)


def node_memtotal_kib(text: str, path: str) -> int:
    """MemTotal of a NUMA node's meminfo; ProbeError naming the file when it has none."""
    kib = meminfo_kib(text)
    if kib is None:
        raise ProbeError("%s: no 'MemTotal: N kB' line" % path)
    return kib


# ---------------------------------------------------------------- mounts


def unescape_mount_field(field: str) -> str:
    """/proc/mounts and /proc/*/mountinfo escape space, tab, newline and backslash as \\ooo octal."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mountinfo_line(line: str) -> Optional[dict[str, Any]]:
    if not line.strip():
        return None
    left, sep, right = line.partition(" - ")
    fields, tail = left.split(), right.split()
    if not sep or len(fields) < 6 or len(tail) < 2:
        raise BadLine("not in the kernel's mountinfo format")
    return {"root": unescape_mount_field(fields[3]), "mount_point": unescape_mount_field(fields[4]),
            "fstype": tail[0], "source": tail[1], "super_options": tail[2].split(",") if len(tail) > 2 else []}


def _mounts_line(line: str) -> Optional[dict[str, Any]]:
    fields = line.split()
    if not fields:
        return None
    if len(fields) < 4:
        raise BadLine("not in the kernel's /proc/mounts format")
    return {"root": "/", "mount_point": unescape_mount_field(fields[1]), "fstype": fields[2],
            "source": fields[0], "super_options": fields[3].split(",")}


def _lines_of(text: str, parse: Any, what: str, bad: Optional[BadLines]) -> list[dict[str, Any]]:
    """parse_lines over text; with no ``bad`` given, the first bad line is a ProbeError naming it."""
    counted = BadLines() if bad is None else bad
    out = [value for _number, _line, value in parse_lines(text, parse, counted, source=what)]
    if bad is None and counted:
        first = counted.sample[0]
        raise ProbeError("%s line %d is not in the kernel's format: %r" % (what, first["line"], first["text"]))
    return out


def parse_mountinfo(text: str, bad: Optional[BadLines] = None) -> list[dict[str, Any]]:
    """/proc/self/mountinfo -> [{mount_point, root, fstype, source, super_options}]."""
    return _lines_of(text, _mountinfo_line, "mountinfo", bad)


def parse_proc_mounts(text: str, bad: Optional[BadLines] = None) -> list[dict[str, Any]]:
    """/proc/mounts (no mount roots: each is taken as "/") in parse_mountinfo's shape.

    The source stays as the kernel wrote it (octal-escaped); unescape_mount_field() it where it is shown.
    """
    return _lines_of(text, _mounts_line, "/proc/mounts", bad)


# ---------------------------------------------------------------- os-release, cpulist


def parse_os_release(text: Optional[str]) -> dict[str, str]:
    """/etc/os-release KEY=value lines (quotes dropped) -> {KEY: value}."""
    values = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip('"')
    return values


def parse_cpulist(text: str) -> list[int]:
    """Kernel cpulist ("0-3,8-11", "" for none) -> sorted CPU numbers; ProbeError on garbage."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        match = re.match(r"^(\d+)(?:-(\d+))?$", part)
        if not match:
            raise ProbeError("cpulist %r is not a list of CPU ranges" % text.strip()[:80])
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        cpus.extend(range(first, last + 1))
    return sorted(set(cpus))

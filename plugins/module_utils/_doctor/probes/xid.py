# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Pure parsers for the NVIDIA driver's lines in the kernel log.

The driver logs an XID as
``NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.``;
older drivers drop the ``PCI:`` prefix and the pid, MIG GPUs add the GPU
instance (``(PCI:0000:01:00 GPU-I:05)``), newer ones a process name
(``pid=452531, name=cache_mgr_main, ...``). It also logs which UUID sits at
an address: ``NVRM: GPU at PCI:0000:01:00: GPU-8ba16ede-...``. Real examples,
with their sources, are in tests/fixtures/kernel-log/README.md.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import re
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import pci_key

_XID = re.compile(r"NVRM: Xid \((?P<address>(?:PCI:)?[0-9a-fA-F:.]+)(?: (?P<instance>[^)]*))?\): (?P<code>\d+),?\s*(?P<rest>.*)$")
_PID = re.compile(r"pid=(?P<pid>'?<unknown>'?|\d+),\s*(?:name=(?P<name>[^,]*),\s*)?(?P<message>.*)$")
_GPU_AT = re.compile(r"NVRM: GPU at (?P<address>(?:PCI:)?[0-9a-fA-F:.]+): (?P<uuid>GPU-[0-9a-fA-F-]+)")
# journalctl -o short-iso: 2026-11-22T13:10:10+0000; dmesg --time-format iso: 2026-11-22T13:10:10,123456+00:00
_ISO = re.compile(r"\s*(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:[.,](\d+))?(Z|[+-]\d\d:?\d\d)?")


def parse_timestamp(line: str) -> Optional[datetime.datetime]:
    """The ISO 8601 timestamp a journalctl/dmesg line starts with, as an aware datetime; None without one."""
    match = _ISO.match(line or "")
    if not match:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    offset = datetime.timedelta(0)
    if zone and zone != "Z":
        digits = zone.replace(":", "")
        offset = datetime.timedelta(hours=int(digits[1:3]), minutes=int(digits[3:5]))
        offset = -offset if digits[0] == "-" else offset
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    return datetime.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micro,
                             tzinfo=datetime.timezone(offset))


def parse_xid_lines(text: Optional[str]) -> list[dict[str, Any]]:
    """Every NVRM Xid line of a kernel log -> [{pci, code, pid, process, instance, message, timestamp}], in log order."""
    events = []
    for line in (text or "").splitlines():
        match = _XID.search(line)
        if not match:
            continue
        event: dict[str, Any] = {
            "pci": pci_key(match.group("address")) or match.group("address"),
            "code": int(match.group("code")),
            "pid": None,
            "process": None,
            "instance": match.group("instance"),
            "message": match.group("rest").strip(),
            "timestamp": None,
        }
        detail = _PID.match(event["message"])
        if detail:
            event["pid"] = int(detail.group("pid")) if detail.group("pid").isdigit() else None
            name = (detail.group("name") or "").strip()
            event["process"] = None if not name or "unknown" in name else name
            event["message"] = detail.group("message").strip()
        stamp = parse_timestamp(line)
        event["timestamp"] = stamp.isoformat() if stamp else None
        events.append(event)
    return events


def parse_gpu_uuids(text: Optional[str]) -> dict[str, str]:
    """{pci: uuid} from the driver's 'NVRM: GPU at PCI:...: GPU-...' lines (names a GPU nvidia-smi lost)."""
    found = {}
    for line in (text or "").splitlines():
        match = _GPU_AT.search(line)
        if match:
            found[pci_key(match.group("address")) or match.group("address")] = match.group("uuid")
    return found


def since(events: list[dict[str, Any]], cutoff: datetime.datetime) -> list[dict[str, Any]]:
    """The events at or after cutoff (an aware datetime); events without a timestamp are kept."""
    kept = []
    for event in events:
        stamp = parse_timestamp(event["timestamp"])
        if stamp is None or stamp >= cutoff:
            kept.append(event)
    return kept

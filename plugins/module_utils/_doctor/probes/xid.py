# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Pure parsers for the NVIDIA driver's lines in the kernel log and in the Fabric Manager log.

The driver logs an XID as
``NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.``;
older drivers drop the ``PCI:`` prefix and the pid, MIG GPUs add the GPU
instance (``(PCI:0000:01:00 GPU-I:05)``), newer ones a process name
(``pid=452531, name=cache_mgr_main, ...``). It also logs which UUID sits at
an address: ``NVRM: GPU at PCI:0000:01:00: GPU-8ba16ede-...``.

A GPU can also be lost without any Xid line: "fallen off the bus" in its
one-line and three-line forms, ``RmInitAdapter failed!`` (the GPU did not
initialise; ``0x62`` is the GSP firmware), ``NV_ERR_RESET_REQUIRED`` and the
GSP timeout banner. NVSwitches log ``nvidia-nvswitchN: SXid (PCI:...): code,
Fatal|Non-fatal, ...`` followed by ``Severity`` and ``Data`` lines of the same
event. Real examples of every form, with their sources, are in
tests/fixtures/kernel-log/README.md.

scan() reads a whole window and counts per (address, code): a storm of one
code never hides another, and only the sample of events is capped. A line
that cannot be read (an impossible date, a bad UTC offset, a 5,000-digit code)
is skipped and counted in ``bad_lines`` (_host/lines.py); the rest are judged.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import re
from collections.abc import Iterable
from typing import Any, Callable, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import LINE_ERRORS, BadLines, parse_lines
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import pci_key

_ADDRESS = r"(?:PCI:)?[0-9a-fA-F]{1,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
_XID = re.compile(r"NVRM: Xid \((?P<address>(?:PCI:)?[0-9a-fA-F:.]+)(?: (?P<instance>[^)]*))?\): (?P<code>\d+),?\s*(?P<rest>.*)$")
_PID = re.compile(r"pid=(?P<pid>'?<unknown>'?|\d+),\s*(?:name=(?P<name>[^,]*),\s*)?(?P<message>.*)$")
_GPU_AT = re.compile(r"NVRM: GPU at (?P<address>(?:PCI:)?[0-9a-fA-F:.]+): (?P<uuid>GPU-[0-9a-fA-F-]+)")
_CAUSED_BY = re.compile(r"caused by previous Xid (\d+)", re.IGNORECASE)
# journalctl -o short-iso: 2026-11-22T13:10:10+0000; dmesg --time-format iso: 2026-11-22T13:10:10,123456+00:00
# (dmesg -x puts the facility and level first: "kern  :err   : 2025-01-25T10:34:54,859532+00:00 ...")
_ISO = re.compile(r"\s*(?:[a-z]+\s*:[a-z]+\s*:\s*)?(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:[.,](\d+))?(Z|[+-]\d\d:?\d\d)?")

# GPU loss or reset-required without an Xid line; the kinds are graded in _host/gpus/xid_table.py (LOSS_CATALOG).
_FALLEN = re.compile(r"NVRM: GPU (?:at )?(%s):? (?:GPU )?has fallen off the bus" % _ADDRESS)
_FALLEN_HEAD = re.compile(r"NVRM: The NVIDIA GPU (%s)\s*$" % _ADDRESS)
_FALLEN_TAIL = re.compile(r"NVRM: fallen off the bus")
_INIT_FAILED = re.compile(r"NVRM: GPU (%s): RmInitAdapter failed! \((0x[0-9a-fA-F]+)[^)]*\)" % _ADDRESS)
_RESET_REQUIRED = re.compile(r"NVRM: .*NV_ERR_RESET_REQUIRED")
_GSP_TIMEOUT = re.compile(r"NVRM: .*(?:\*+ GSP Timeout \*+|kgspInitRm_IMPL: .*(?:fail|timeout|error))", re.IGNORECASE)
_LINE_ADDRESS = re.compile(r"NVRM: GPU (?:at )?(%s)\b" % _ADDRESS)
_LINE_INSTANCE = re.compile(r"NVRM: (GPU\d+) ")

_SXID = re.compile(r"nvidia-nvswitch(?P<switch>\d+): SXid \((?P<address>%s)\): (?P<code>\d+),\s*(?P<rest>.*)$" % _ADDRESS)

# Fabric Manager: "[Jul 09 2024 18:14:07] [ERROR] [tid 12727] detected NVSwitch non-fatal error 12028 on ..."
_FM_ERROR_LINE = re.compile(r"^\[(?P<stamp>[A-Z][a-z]{2} \d\d \d{4} \d\d:\d\d:\d\d)\] \[ERROR\] (?:\[tid \d+\] )?(?P<message>.*)$")
_FM_SWITCH = re.compile(r"detected NVSwitch (?P<kind>fatal|non-fatal) error (?P<code>\d+)(?:.*pci bus id (?P<address>[0-9a-fA-F:.]+))?",
                        re.IGNORECASE)

# How many events of each kind are listed in the probe's data; counts always cover the whole window.
SAMPLE = 100


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


def _stamp(line: str) -> Optional[str]:
    stamp = parse_timestamp(line)
    return stamp.isoformat() if stamp else None


def _key(address: Optional[str]) -> Optional[str]:
    return pci_key(address) or address if address else None


def parse_xid_line(line: str) -> Optional[dict[str, Any]]:
    """One NVRM Xid line -> {pci, code, pid, process, instance, message, caused_by, timestamp}; None for other lines."""
    match = _XID.search(line)
    if not match:
        return None
    event: dict[str, Any] = {
        "pci": _key(match.group("address")),
        "code": int(match.group("code")),
        "pid": None,
        "process": None,
        "instance": match.group("instance"),
        "message": match.group("rest").strip(),
        "caused_by": None,
        "timestamp": _stamp(line),
    }
    detail = _PID.match(event["message"])
    if detail:
        event["pid"] = int(detail.group("pid")) if detail.group("pid").isdigit() else None
        name = (detail.group("name") or "").strip()
        event["process"] = None if not name or "unknown" in name else name
        event["message"] = detail.group("message").strip()
    cause = _CAUSED_BY.search(event["message"])
    if cause:
        event["caused_by"] = int(cause.group(1))
    return event


def parse_xid_lines(text: Optional[str], bad: Optional[BadLines] = None) -> list[dict[str, Any]]:
    """Every NVRM Xid line of a kernel log, in log order; a line that cannot be read is counted in ``bad``."""
    return [event for _number, _line, event in parse_lines(text, parse_xid_line, _bad(bad))]


def _bad(bad: Optional[BadLines]) -> BadLines:
    return BadLines() if bad is None else bad


def _gpu_uuid(line: str) -> Optional[tuple[str, str]]:
    match = _GPU_AT.search(line)
    return ((_key(match.group("address")) or ""), match.group("uuid")) if match else None


def parse_gpu_uuids(text: Optional[str], bad: Optional[BadLines] = None) -> dict[str, str]:
    """{pci: uuid} from the driver's 'NVRM: GPU at PCI:...: GPU-...' lines (names a GPU nvidia-smi lost)."""
    return dict(pair for _number, _line, pair in parse_lines(text, _gpu_uuid, _bad(bad)))


def _loss_line(line: str) -> Optional[tuple[Any, ...]]:
    """One kernel-log line for parse_loss_lines: ("head", address) of the three-line form, ("tail",), or
    (kind, address or None, line) of a one-line loss; None for other lines."""
    if "NVRM" not in line or _XID.search(line):
        return None
    head = _FALLEN_HEAD.search(line)
    if head:
        return ("head", head.group(1))
    fallen = _FALLEN.search(line)
    if fallen:
        return ("fallen_off_bus", fallen.group(1), line)
    if _FALLEN_TAIL.search(line):
        return ("tail",)
    init = _INIT_FAILED.search(line)
    if init:
        return ("gsp_init_failed" if init.group(2).lower() == "0x62" else "init_failed", init.group(1), line)
    if _RESET_REQUIRED.search(line):
        return ("reset_required", None, line)
    if _GSP_TIMEOUT.search(line):
        return ("gsp_timeout", None, line)
    return None


def _loss_event(kind: str, address: Optional[str], line: str) -> dict[str, Any]:
    if address is None:
        named = _LINE_ADDRESS.search(line)
        address = named.group(1) if named else None
    instance = _LINE_INSTANCE.search(line)
    return {"kind": kind, "pci": _key(address), "instance": instance.group(1) if instance else None,
            "message": line.split("NVRM:", 1)[-1].strip(), "timestamp": _stamp(line)}


def parse_loss_lines(text: Optional[str], bad: Optional[BadLines] = None) -> list[dict[str, Any]]:
    """GPU loss / reset-required lines that are not Xid lines -> [{kind, pci, instance, message, timestamp}], in log order."""
    events = []
    bad = _bad(bad)
    pending: Optional[tuple[str, int]] = None  # the address of "The NVIDIA GPU <addr>" and its line number
    for number, line, found in parse_lines(text, _loss_line, bad):
        if found[0] == "head":
            pending = (found[1], number)
            continue
        if found[0] == "tail":
            if pending is None or number - pending[1] > 3:
                continue
            found, pending = ("fallen_off_bus", pending[0], line), None
        try:
            events.append(_loss_event(*found))
        except LINE_ERRORS as exc:
            bad.add(number, line, exc)
    return events


def _sxid_line(line: str) -> Optional[dict[str, Any]]:
    match = _SXID.search(line)
    if not match:
        return None
    rest = match.group("rest").strip()
    word = rest.split(",", 1)[0].strip().lower()
    fatal = True if word == "fatal" else False if word == "non-fatal" else None
    return {"address": _key(match.group("address")), "device": match.group("address").replace("PCI:", ""),
            "switch": int(match.group("switch")), "code": int(match.group("code")), "fatal": fatal,
            "header": fatal is not None, "message": rest, "timestamp": _stamp(line)}


def parse_sxid_lines(text: Optional[str], bad: Optional[BadLines] = None) -> list[dict[str, Any]]:
    """NVSwitch SXid lines -> [{address, switch, code, fatal, header, message, timestamp}], in log order.

    fatal is True/False from the line's own 'Fatal'/'Non-fatal' word, None on the 'Severity' and 'Data'
    lines that continue an event (header False on those).
    """
    return [event for _number, _line, event in parse_lines(text, _sxid_line, _bad(bad))]


def since(events: list[dict[str, Any]], cutoff: datetime.datetime) -> list[dict[str, Any]]:
    """The events at or after cutoff (an aware datetime); events without a timestamp are kept."""
    kept = []
    for event in events:
        stamp = parse_timestamp(event["timestamp"] or "")
        if stamp is None or stamp >= cutoff:
            kept.append(event)
    return kept


def _group(events: list[dict[str, Any]], key_fields: tuple[str, ...], extra: Any = None) -> list[dict[str, Any]]:
    """Count events per key: {key fields..., count, first_seen, last_seen, last_message}, in order of first appearance."""
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for event in events:
        key = tuple(event[field] for field in key_fields)
        group = groups.get(key)
        if group is None:
            group = dict((field, event[field]) for field in key_fields)
            group.update(count=0, first_seen=event["timestamp"], last_seen=None, last_message=None)
            groups[key] = group
        group["count"] += 1
        group["last_seen"] = event["timestamp"] or group["last_seen"]
        group["last_message"] = event["message"]
        if extra is not None:
            extra(group, event)
    return list(groups.values())


def _add_cause(group: dict[str, Any], event: dict[str, Any]) -> None:
    if event.get("caused_by") is not None:
        causes = group.setdefault("caused_by", {})
        causes[str(event["caused_by"])] = causes.get(str(event["caused_by"]), 0) + 1


def _add_instance(group: dict[str, Any], event: dict[str, Any]) -> None:
    group.setdefault("instance", event["instance"])


def _add_severity(group: dict[str, Any], event: dict[str, Any]) -> None:
    group.setdefault("fatal", None)
    group.setdefault("switch", event["switch"])
    group.setdefault("device", event["device"])
    if event["fatal"] is not None:
        group["fatal"] = bool(group["fatal"]) or event["fatal"]


def _counter_within(windows: Iterable[float], now: datetime.datetime) -> Callable[[dict[str, Any], dict[str, Any]], None]:
    """A _group extra that counts, per window of hours, the events of a group at or after now minus that window
    (``within``: {"6": 2}); an event without a timestamp is in none of them (its time is not known)."""
    starts = [(_window_key(hours), now - datetime.timedelta(hours=hours)) for hours in windows]

    def count(group: dict[str, Any], event: dict[str, Any]) -> None:
        if not starts:
            return
        within = group.setdefault("within", dict((key, 0) for key, _start in starts))
        stamp = parse_timestamp(event["timestamp"] or "")
        for key, start in starts:
            if stamp is not None and stamp >= start:
                within[key] += 1
    return count


def _window_key(hours: float) -> str:
    """How a window of hours is named in ``within``: 6 -> "6", 1.5 -> "1.5"."""
    return "%g" % hours


def scan(text: Optional[str], cutoff: Optional[datetime.datetime] = None, windows: Iterable[float] = (),
         now: Optional[datetime.datetime] = None) -> dict[str, Any]:
    """Everything doctor grades in a kernel log: Xids, GPU losses without an Xid, SXids and the address -> UUID map.

    Counts cover every event in the window (at or after cutoff when given); the 'xids' sample keeps the
    newest SAMPLE events and 'xids_dropped' says how many were left out of it. 'bad_lines': the driver's lines
    that could not be read ({count, sample}), skipped. ``windows``: hours (hydra_expect.xid_policy's) within which
    each Xid group also counts its events, up to ``now`` (an aware datetime, default the present), as ``within``.
    """
    bad = BadLines()
    xids = parse_xid_lines(text, bad)
    losses = parse_loss_lines(text, bad)
    sxids = parse_sxid_lines(text, bad)
    if cutoff is not None:
        xids, losses, sxids = since(xids, cutoff), since(losses, cutoff), since(sxids, cutoff)
    # An SXid event is its header line; Severity/Data lines only count when no header of that code was seen.
    headed = set((e["address"], e["code"]) for e in sxids if e["header"])
    sxid_events = [e for e in sxids if e["header"] or (e["address"], e["code"]) not in headed]
    within = _counter_within(windows, now or datetime.datetime.now(datetime.timezone.utc))

    def xid_extra(group: dict[str, Any], event: dict[str, Any]) -> None:
        _add_cause(group, event)
        within(group, event)
    return {
        "xid_counts": _group(xids, ("pci", "code"), xid_extra),
        "xids": xids[-SAMPLE:],
        "xids_total": len(xids),
        "xids_dropped": max(0, len(xids) - SAMPLE),
        "gpu_losses": _group(losses, ("pci", "kind"), _add_instance),
        "sxid_counts": _group(sxid_events, ("address", "code"), _add_severity),
        "gpu_uuids": parse_gpu_uuids(text, bad),
        "bad_lines": bad.as_dict(),
    }


def _fm_line(line: str) -> Optional[tuple[Optional[datetime.datetime], dict[str, Any]]]:
    """One Fabric Manager [ERROR] line -> (its time or None, the event); None for other lines."""
    match = _FM_ERROR_LINE.match(line.strip())
    if not match:
        return None
    # An impossible date is the stamp's problem, not the event's: kept, undated.
    try:
        when: Optional[datetime.datetime] = datetime.datetime.strptime(match.group("stamp"), "%b %d %Y %H:%M:%S")
    except ValueError:
        when = None
    message = match.group("message").strip()
    event: dict[str, Any] = {"message": message, "timestamp": when.isoformat() if when else None}
    switch = _FM_SWITCH.search(message)
    if switch:
        event.update(address=_key(switch.group("address")), device=switch.group("address"),
                     code=int(switch.group("code")), fatal=switch.group("kind").lower() == "fatal")
    return when, event


def scan_fabric_manager_log(text: Optional[str], cutoff: Optional[datetime.datetime] = None) -> dict[str, Any]:
    """The [ERROR] entries of a Fabric Manager log: NVSwitch fatal/non-fatal errors per (address, code), other errors counted.

    cutoff is a naive local time (the log's own clock); entries before it are left out. A line without
    the log's '[date] [LEVEL]' prefix continues the entry above it and is not read on its own; an [ERROR] line
    that cannot be read is counted in 'bad_lines'.
    """
    switch_events: list[dict[str, Any]] = []
    other: list[dict[str, Any]] = []
    bad = BadLines()
    for _number, _line, (when, event) in parse_lines(text, _fm_line, bad):
        if cutoff is not None and when is not None and when < cutoff:
            continue
        (switch_events if "code" in event else other).append(event)

    def fatal(group: dict[str, Any], event: dict[str, Any]) -> None:
        group["fatal"] = bool(group.get("fatal")) or event["fatal"]
        group.setdefault("device", event["device"])

    return {"nvswitch_errors": _group(switch_events, ("address", "code"), fatal),
            "errors": other[-SAMPLE:], "errors_total": len(other), "bad_lines": bad.as_dict()}

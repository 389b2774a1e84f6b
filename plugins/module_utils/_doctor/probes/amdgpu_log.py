# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Pure parser of the amdgpu driver's lines in the kernel log: which GPU (PCI address) had which kind of event.

Formats differ by kernel: ``[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout ...`` (older) vs
``amdgpu 0000:28:00.0: amdgpu: ring gfx_0.0.0 timeout ...``; ``GPU reset begin!`` gained ``. Source:  N``. Lines
are matched on the message text, whatever the prefix (ctime, ISO, monotonic, journal). The kinds (graded in
checks/amd.py, AMDGPU_EVENTS):

- ``ras_uncorrectable``: ``uncorrectable hardware error(ERREVENT_...) detected!``, ``N uncorrectable hardware errors
  detected in <block> block`` with N > 0, an ACA/MCA record whose STATUS has the UC bit, poison consumption;
- ``ras_correctable``: ``N correctable hardware errors detected in <block> block`` with N > 0, ACA records without UC;
- ``bad_page_threshold``: ``RAS records:N exceed threshold:M``, ``Saved bad pages(N) reaches threshold value(M)``,
  ``GPU will not be initialized. Replace this GPU``;
- ``init_failed``: ``Fatal error during GPU init``, ``probe of <bdf> failed with error``, ``hw_init of IP block
  ... failed``, ``amdgpu_device_ip_init failed``;
- ``reset_failed``: ``GPU reset(N) failed``, ``ASIC reset failed``, ``GPU Recovery Failed``; or a ``GPU reset
  begin!`` with a failure of the SMU/DPM after it (``Failed to disable DPM``, ``Failed to send message``, ``reset
  failed``) and no success before the window ends or the next reset begins; or a resume failure after ``GPU reset
  succeeded, trying to resume``. ``reset_succeeded``: ``GPU reset succeeded`` (counted once per reset);
  ``reset_unfinished``: a ``GPU reset begin!`` with no outcome and no failure in the window;
- ``ring_timeout``: ``ring <name> timeout``, ``MES failed to respond``, ``qcm fence wait loop timeout``;
  ``vram_lost``: ``VRAM is lost due to GPU reset``;
- ``page_fault``: ``[gfxhub] page fault``, ``retry page fault``, ``VM_L2_PROTECTION_FAULT_STATUS``, ``Memory access
  fault``: an application's bad memory access, with the process named where the line names it.

A line that cannot be read (an impossible date, a 5,000-digit error count) is skipped and counted in ``bad_lines``
(_host/lines.py); the rest are graded.

Healthy boot lines with alarming words (``RAS: optional ras ta ucode is not available``, ``MEM ECC is active``,
``0 uncorrectable hardware errors detected``) match none of these.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import re
from collections import OrderedDict
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes.xid import parse_timestamp
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLines, parse_lines
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import pci_key

SAMPLE = 100
_ADDRESS = re.compile(r"\b([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\b")
_AMD_LINE = re.compile(r"amdgpu|\[drm|\[Hardware Error\]|kfd", re.IGNORECASE)

_UE_EVENT = re.compile(r"uncorrectable hardware error\s*\((ERREVENT_\w+)\)|(ERREVENT_\w+)", re.IGNORECASE)
_BLOCK_COUNT = re.compile(r"(\d+)\s+(uncorrectable|correctable|deferred)\s+hardware errors? detected in (?:total in )?(\S+)",
                          re.IGNORECASE)
_ACA = re.compile(r"aca entry\[\d+\]\.STATUS=0x([0-9a-fA-F]+)", re.IGNORECASE)
_POISON = re.compile(r"poison (?:is )?consum", re.IGNORECASE)
_THRESHOLD = re.compile(r"RAS records:\s*\d+\s*exceed threshold|Saved bad pages\s*\(\d+\)\s*reaches threshold|"
                        r"GPU will not be initialized\. Replace this GPU|bad page threshold.*exceed", re.IGNORECASE)
_INIT_FAILED = re.compile(r"Fatal error during GPU init|probe of \S+ failed with error|hw_init of IP block <\S+> failed|"
                          r"amdgpu_device_ip_init failed|amdgpu_device_init failed", re.IGNORECASE)
_RESET_BEGIN = re.compile(r"GPU reset begin", re.IGNORECASE)
_RESET_OK = re.compile(r"GPU reset(?:\(\d+\))? succeeded", re.IGNORECASE)
_RESET_FAILED = re.compile(r"GPU reset(?:\(\d+\))? failed|ASIC reset failed|GPU Recovery Failed|recover(?:y)? failed",
                           re.IGNORECASE)
_RESET_TROUBLE = re.compile(r"Failed to disable DPM|Fail(?:ed)? to disable dpm|Failed to disable (?:all )?smu features|"
                            r"Failed to send message|reset failed|SMU is not ready|failed to resume|"
                            r"resume of IP block <\S+> failed|ip_resume failed", re.IGNORECASE)
_RING_TIMEOUT = re.compile(r"ring \S+ timeout|MES failed to respond|qcm fence wait loop timeout|"
                           r"The cp might be in an unrecoverable state", re.IGNORECASE)
_VRAM_LOST = re.compile(r"VRAM is lost", re.IGNORECASE)
_PAGE_FAULT = re.compile(r"\[\w+hub\] (?:retry |no-retry )?page fault|retry page fault|VM_L2_PROTECTION_FAULT_STATUS|"
                         r"Memory access fault", re.IGNORECASE)
_PROCESS = re.compile(r"for process (\S+) pid (\d+)|Process (\S+) pid (\d+)", re.IGNORECASE)
# The MCA/ACA STATUS register's UC (uncorrected) bit.
_UC_BIT = 1 << 61

KINDS = ("ras_uncorrectable", "bad_page_threshold", "init_failed", "reset_failed", "reset_unfinished",
         "ras_correctable", "reset_succeeded", "ring_timeout", "vram_lost", "page_fault")


def _classify(message: str) -> Optional[str]:
    """The kind of one amdgpu line, before the reset sequence is considered; None for other lines."""
    block = _BLOCK_COUNT.search(message)
    if block:
        if int(block.group(1)) == 0:
            return None
        return "ras_correctable" if block.group(2).lower() == "correctable" else "ras_uncorrectable"
    aca = _ACA.search(message)
    if aca:
        return "ras_uncorrectable" if int(aca.group(1), 16) & _UC_BIT else "ras_correctable"
    for pattern, kind in ((_THRESHOLD, "bad_page_threshold"), (_INIT_FAILED, "init_failed"),
                          (_RESET_FAILED, "reset_failed"), (_RESET_OK, "reset_succeeded"),
                          (_VRAM_LOST, "vram_lost"), (_RING_TIMEOUT, "ring_timeout"), (_PAGE_FAULT, "page_fault")):
        if pattern.search(message):
            return kind
    if _POISON.search(message):
        return "ras_uncorrectable"
    match = _UE_EVENT.search(message)
    if match and "may lost" not in message:
        return "ras_uncorrectable"
    return None


def _process(message: str) -> Optional[str]:
    match = _PROCESS.search(message)
    if not match:
        return None
    name, pid = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
    return "%s (pid %s)" % (name.rstrip(","), pid)


def _amd_line(line: str) -> Optional[tuple[Optional[datetime.datetime], Optional[str], str, Optional[str]]]:
    """One amdgpu line -> (its time, its PCI key, the message, its kind before the reset sequence); None for others."""
    if not _AMD_LINE.search(line):
        return None
    address = _ADDRESS.search(line)
    message = line.strip()
    return parse_timestamp(line), pci_key(address.group(1)) if address else None, message, _classify(message)


def scan(text: Optional[str], cutoff: Optional[datetime.datetime] = None) -> dict[str, Any]:
    """Every amdgpu event of a kernel log (lines at or after ``cutoff`` where they carry a timestamp), counted per
    (PCI address, kind): {"counts": [{pci, kind, count, first_seen, last_seen, last_message, processes}],
    "events": [the newest SAMPLE events], "events_total", "events_dropped", "bad_lines": {count, sample}}."""
    events: list[dict[str, Any]] = []
    resetting: OrderedDict[Optional[str], dict[str, Any]] = OrderedDict()
    last_pci: Optional[str] = None

    def add(kind: str, pci: Optional[str], message: str, stamp: Optional[str]) -> None:
        events.append({"pci": pci, "kind": kind, "message": message[:300], "timestamp": stamp,
                       "process": _process(message) if kind == "page_fault" else None})

    bad = BadLines()
    for _number, _line, (when, pci, message, kind) in parse_lines(text, _amd_line, bad):
        if cutoff is not None and when is not None and when < cutoff:
            continue
        stamp = when.isoformat() if when else None
        key = pci or (next(reversed(resetting)) if resetting else last_pci)
        if pci:
            last_pci = pci
        if _RESET_BEGIN.search(message):
            prior = resetting.pop(key, None)
            if prior and prior["phase"] == "reset" and prior["trouble"]:
                add("reset_failed", key, prior["trouble"], prior["stamp"])
            resetting[key] = {"message": message, "stamp": stamp, "trouble": None, "phase": "reset"}
            continue
        if kind == "reset_succeeded":
            prior = resetting.pop(key, None)
            if prior and prior["phase"] == "resuming":
                continue  # "GPU reset(N) succeeded!" closing a reset already counted at "trying to resume"
            add(kind, key, message, stamp)
            if "resume" in message.lower():
                resetting[key] = {"message": message, "stamp": stamp, "trouble": None, "phase": "resuming"}
        elif kind == "reset_failed":
            resetting.pop(key, None)
            add(kind, key, message, stamp)
        elif kind is None and key in resetting and _RESET_TROUBLE.search(message):
            if resetting[key]["phase"] == "resuming":
                resetting.pop(key)
                add("reset_failed", key, message, stamp)
            elif resetting[key]["trouble"] is None:
                resetting[key]["trouble"] = message
        elif kind is not None:
            add(kind, key if kind != "page_fault" else pci, message, stamp)
        elif events and events[-1]["kind"] == "page_fault" and events[-1]["process"] is None and events[-1]["pci"] == pci:
            # Older kernels name the process on the line after the fault's.
            events[-1]["process"] = _process(message)
    for key, begun in resetting.items():
        if begun["phase"] == "reset":
            add("reset_failed" if begun["trouble"] else "reset_unfinished", key, begun["trouble"] or begun["message"],
                begun["stamp"])
    counts: OrderedDict[tuple[Optional[str], str], dict[str, Any]] = OrderedDict()
    for event in events:
        group = counts.setdefault((event["pci"], event["kind"]), {
            "pci": event["pci"], "kind": event["kind"], "count": 0, "first_seen": event["timestamp"],
            "last_seen": None, "last_message": None, "processes": []})
        group["count"] += 1
        group["last_seen"] = event["timestamp"]
        group["last_message"] = event["message"]
        if event["process"] and event["process"] not in group["processes"] and len(group["processes"]) < 10:
            group["processes"].append(event["process"])
    return {"counts": list(counts.values()), "events": events[-SAMPLE:], "events_total": len(events),
            "events_dropped": max(0, len(events) - SAMPLE), "bad_lines": bad.as_dict()}

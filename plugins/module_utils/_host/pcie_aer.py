# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""PCIe Advanced Error Reporting counters of PCI functions: /sys/bus/pci/devices/<address>/aer_dev_{correctable,nonfatal,fatal}.

The kernel (4.19+, drivers/pci/pcie/aer.c; Documentation/ABI/testing/sysfs-bus-pci-devices-aer) writes one
"<name> <count>" line per error type and a last TOTAL_ERR_COR / TOTAL_ERR_NONFATAL / TOTAL_ERR_FATAL line. The
names changed over kernel versions (4.19 wrote "Receiver Error 2", later kernels "RxErr 2"), so a line is read
as "everything before the last field" and "the last field". The total is what the rate analysis judges (the
kernel notes that it counts error messages and may differ from the sum of the lines); the non-zero lines are kept
to name the error. A line that cannot be read is skipped and counted (_host/lines.py); a file without its TOTAL
line has no total (unreadable, not zero). The counters are 64-bit and live in kernel memory (no device access):
they reset only when the device is removed or the host reboots.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import time
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text_if_exists
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLine, BadLines, parse_lines

# file suffix -> the severity it counts
SEVERITIES = ("correctable", "nonfatal", "fatal")
_FILES = {"correctable": "aer_dev_correctable", "nonfatal": "aer_dev_nonfatal", "fatal": "aer_dev_fatal"}


def _line(line: str) -> Optional[tuple[str, int]]:
    fields = line.split()
    if not fields:
        return None
    if len(fields) < 2:
        raise BadLine("no count after %r" % fields[0][:40])
    count = fields[-1]
    if not count.isdigit() or len(count) > 20:
        raise BadLine("%r is not a count" % count[:40])
    return " ".join(fields[:-1]), int(count)


def parse_aer(text: Optional[str], bad: Optional[BadLines] = None, source: Optional[str] = None) -> dict[str, Any]:
    """One aer_dev_* file -> {total: the TOTAL_ERR_* count or None, errors: {name: count} of the non-zero lines}."""
    bad = BadLines() if bad is None else bad
    total: Optional[int] = None
    errors: dict[str, int] = {}
    for _number, _raw, (name, count) in parse_lines(text, _line, bad, source=source):
        if name.startswith("TOTAL_ERR_"):
            total = count
        elif count:
            errors[name] = count
    return {"total": total, "errors": errors}


def read_aer(devices_dir: str, functions: list[dict[str, Any]], timeout: Optional[float] = None) -> dict[str, Any]:
    """The AER counters of each function ({address, kind, name}) under a sysfs ``bus/pci/devices`` directory.

    Returns {read_at, devices: [{address, kind, name, correctable, nonfatal, fatal (totals or None), errors
    ({"<severity> <name>": count} non-zero), unreadable ({severity: reason})}], without_aer: [addresses with no
    aer_dev_* file], bad_lines}. One deadline covers every read; past it the rest is unreadable.
    """
    at = None if timeout is None else time.monotonic() + timeout
    bad = BadLines()
    devices, without = [], []
    read_at = time.time()
    for function in functions:
        address = function["address"]
        record: dict[str, Any] = dict(function, errors={}, unreadable={})
        found = False
        for severity in SEVERITIES:
            record[severity] = None
            path = os.path.join(devices_dir, address, _FILES[severity])
            left = None if at is None else at - time.monotonic()
            if left is not None and left <= 0:
                record["unreadable"][severity] = "not read: the %gs deadline of the reading had passed" % (timeout or 0)
                found = True
                continue
            try:
                text = read_text_if_exists(path, left)
            except ProbeError as exc:
                record["unreadable"][severity] = str(exc)
                found = True
                continue
            if text is None:
                continue
            found = True
            parsed = parse_aer(text, bad, source="%s/%s" % (address, _FILES[severity]))
            if parsed["total"] is None:
                record["unreadable"][severity] = "%s has no TOTAL_ERR_ line" % path
            record[severity] = parsed["total"]
            record["errors"].update(("%s %s" % (severity, name), count) for name, count in parsed["errors"].items())
        if found:
            devices.append(record)
        else:
            without.append(address)
    return {"read_at": read_at, "devices": devices, "without_aer": without, "bad_lines": bad.as_dict()}

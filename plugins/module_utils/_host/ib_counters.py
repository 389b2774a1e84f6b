# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""InfiniBand / RoCE port error counters from /sys/class/infiniband, every read under one deadline.

``<dev>/ports/<p>/counters/*`` are the kernel's PortCounters attributes (drivers/infiniband/core/sysfs.c,
PORT_PMA_ATTR): each has a width in bits, and per the InfiniBand specification a PortCounters counter stops at
all ones (it saturates, it never wraps). PORT_COUNTERS below is that width by name, the one place the rate
analysis learns a counter's width from: a value at 2**bits - 1 is reported in ``saturated`` (its increments
since are invisible until the counters are cleared, ``perfquery -x -R``, or the host reboots).
``hw_counters/*`` are the driver's own counters, printed as 64-bit values (rdma_hw_stats): they neither
saturate nor wrap in practice. Only error counters are read (no data or packet counters: they are large,
they change on every read, and they say nothing about health).

A counter file that is missing is not there on this NIC (not every ConnectX generation has every
hw_counter) and is left out; one that cannot be read, reads ``N/A (no PMA)`` (older kernels when the
PerfMgt query fails) or is not a whole number goes to ``unreadable`` with the reason: unreadable is not zero.

Reading a counter may send a firmware command to the NIC, which can hang with the NIC. One deadline covers
the whole reading: each file read gets what is left of it but at most READ_SHARE of the whole (a hung NIC must
leave time for the others), a device whose read ran out of time is not read again (its other counters are
unreadable "not read: an earlier read of <dev> timed out"), and once the deadline has passed, what is left is
unreadable with that reason.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import re
import time
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import CallTimedOut, ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import list_dir, read_text_if_exists
from ansible_collections.continuum.hydra.plugins.module_utils._host.network import parse_ib_rate_gbps, parse_ib_state

# counters/: error counters and their width in bits (drivers/infiniband/core/sysfs.c PORT_PMA_ATTR(name, index,
# width, offset)); the data, packet and xmit_wait counters are left out.
PORT_COUNTERS: dict[str, int] = {
    "symbol_error": 16,
    "link_error_recovery": 8,
    "link_downed": 8,
    "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16,
    "port_rcv_switch_relay_errors": 16,
    "port_xmit_discards": 16,
    "port_xmit_constraint_errors": 8,
    "port_rcv_constraint_errors": 8,
    "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4,
    "VL15_dropped": 16,
}
# hw_counters/: the transport error counters NVSentinel's NIC monitor allows (docs/configuration/nic-health-monitor.md).
HW_COUNTERS = ("rnr_nak_retry_err", "local_ack_timeout_err", "req_transport_retries_exceeded", "roce_slow_restart",
               "out_of_sequence", "packet_seq_err", "implied_nak_seq_err")
_WHOLE = re.compile(r"^\d{1,20}$")
# The most of the reading's deadline one file read may take.
READ_SHARE = 0.25


def counter_max(name: str) -> Optional[int]:
    """The value a saturating PortCounters counter stops at; None for a counter that does not saturate."""
    bits = PORT_COUNTERS.get(name)
    return (1 << bits) - 1 if bits else None


def parse_counter(text: str, path: str) -> int:
    """A counter file's text -> its value; ProbeError naming the file for anything but a whole number."""
    value = text.strip()
    if not _WHOLE.match(value):
        raise ProbeError("%s: %r is not a counter value" % (path, value[:40]))
    return int(value)


class _Budget:
    """What is left of one deadline, and the devices whose reads ran out of time."""

    def __init__(self, seconds: Optional[float]) -> None:
        self.at = None if seconds is None else time.monotonic() + seconds
        self.seconds = seconds
        self.stuck: set[str] = set()

    def read(self, path: str, device: str) -> Optional[str]:
        if device in self.stuck:
            raise ProbeError("not read: an earlier read of %s timed out" % device)
        left = None if self.at is None or self.seconds is None else self.at - time.monotonic()
        if left is not None and left <= 0:
            raise ProbeError("not read: the %gs deadline of the reading had passed" % (self.seconds or 0))
        if left is not None and self.seconds is not None:
            left = min(left, self.seconds * READ_SHARE)
        try:
            return read_text_if_exists(path, left)
        except CallTimedOut:
            self.stuck.add(device)
            raise ProbeError("%s: no answer within the deadline" % path) from None


def _stripped(budget: _Budget, path: str, device: str) -> Optional[str]:
    try:
        text = budget.read(path, device)
    except ProbeError:
        return None
    return text.strip() if text is not None else None


def _read_counters(budget: _Budget, port_dir: str, device: str) -> tuple[dict[str, int], dict[str, str], list[str]]:
    counters: dict[str, int] = {}
    unreadable: dict[str, str] = {}
    saturated: list[str] = []
    wanted = [("counters", name) for name in PORT_COUNTERS] + [("hw_counters", name) for name in HW_COUNTERS]
    for folder, name in wanted:
        path = os.path.join(port_dir, folder, name)
        try:
            text = budget.read(path, device)
            if text is None:
                continue  # not on this NIC
            counters[name] = parse_counter(text, path)
        except ProbeError as exc:
            unreadable[name] = str(exc)
            continue
        if counters[name] == counter_max(name):
            saturated.append(name)
    return counters, unreadable, saturated


def read_port_counters(root: str = "/", timeout: Optional[float] = None) -> dict[str, Any]:
    """Every RDMA port under root's /sys/class/infiniband with its state, rate and error counters.

    Returns {read_at (Unix time of the reading), ports: [{device, port, state, phys_state, rate_gbps,
    link_layer, fw_ver, node_guid, counters, unreadable, saturated}]}. ProbeAbsent without an RDMA port;
    ProbeError when the class directory cannot be listed. A state or rate that cannot be read is None with
    the reason in the port's ``unreadable`` (under ``state`` / ``rate``).
    """
    base = os.path.join(root, "sys/class/infiniband")
    if not os.path.isdir(base):
        raise ProbeAbsent("no InfiniBand/RDMA device: %s does not exist" % base)
    budget = _Budget(timeout)
    read_at = time.time()
    ports = []
    for device in list_dir(base):
        ports_dir = os.path.join(base, device, "ports")
        if not os.path.isdir(ports_dir):
            continue
        fw_ver = _stripped(budget, os.path.join(base, device, "fw_ver"), device)
        node_guid = _stripped(budget, os.path.join(base, device, "node_guid"), device)
        for port in sorted(list_dir(ports_dir), key=lambda p: int(p) if p.isdigit() else -1):
            port_dir = os.path.join(ports_dir, port)
            counters, unreadable, saturated = _read_counters(budget, port_dir, device)
            record: dict[str, Any] = {"device": device, "port": int(port) if port.isdigit() else port, "fw_ver": fw_ver,
                                      "node_guid": node_guid, "state": None, "phys_state": None, "rate_gbps": None,
                                      "link_layer": _stripped(budget, os.path.join(port_dir, "link_layer"), device)}
            for field, parse in (("state", parse_ib_state), ("phys_state", parse_ib_state), ("rate", parse_ib_rate_gbps)):
                path = os.path.join(port_dir, field)
                try:
                    text = budget.read(path, device)
                    if text is None:
                        raise ProbeError("%s does not exist" % path)
                    if field == "rate" and not text.strip():
                        continue  # an empty rate: the port has not trained a link
                    value = parse(text, path)
                except ProbeError as exc:
                    unreadable[field] = str(exc)
                    continue
                if field == "rate":
                    record["rate_gbps"] = value
                else:
                    record[field] = value[1]  # type: ignore[index]
            record.update(counters=counters, unreadable=unreadable, saturated=saturated)
            ports.append(record)
    if not ports:
        raise ProbeAbsent("no RDMA port under %s" % base)
    return {"read_at": read_at, "ports": ports}

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Interconnect health over time (pure): error rates across runs, counter resets, flaps, ports against their peers,
and one NVLink domain per rack group. docs/interconnect.md is the user's page.

doctor reads raw counters with the time of the reading (network.ib_counters, gpu.nvlink_errors, system.pcie_aer)
and the host's thresholds; reading() keeps what later runs need in the history snapshot (compact: the judged
counters that are not zero, the port states, bounded per host), and analyse_interconnect() compares this run with
each host's previous reading:

- rate = increase / the interval, over at least the rule's own unit (an increase seen within minutes is counted
  against a whole hour for a per-hour limit: never an hourly rate from a 5-second interval). RULES below are the
  defaults, their hydra_expect keys and their sources. A first reading of a host reports its lifetime totals as
  information only.
- the interval restarts (the rate is unknown for it, never negative or huge) when the boot id changed (reboot), the
  NVIDIA driver version changed (NVLink), the NIC firmware changed, the reading is not later than the last, or any
  judged counter of the port, link or device is lower than the last run's (cleared, driver reloaded, or a counter
  that wrapped). The classic 32-bit-or-less InfiniBand PortCounters never wrap: they stop at all ones
  (_host/ib_counters.PORT_COUNTERS, by name). A counter that has stopped at its maximum gives a lower bound ("at
  least") while it was below it last run, and an unknown rate once it was already there; NVLink (NVML, 64-bit),
  hw_counters and AER (64-bit) counters cannot realistically wrap, so a lower value is a reset there too. A
  counter that could not be read, in either run, is not judged (and is never zero).
- a flap: a port whose state changed between the runs, or whose link_downed grew; an NVLink link that went down or
  came back (gpu.nvlink). Flaps and rate breaches become findings (findings.py) that stay open until the host has
  had ``interconnect_clean_runs`` (3) runs without them, or until acknowledged.
- peers: per hardware class, a port that is ACTIVE on most hosts (at least PEER_MIN_HOSTS reading it) at one rate is
  flagged where it is down, missing or slower, naming peers that have it right (uncabled or mis-cabled).
- NVLink domain: the hosts of one ``nvlink_domain`` (a GB200/GB300 rack group) must report one fabric cluster UUID
  and one clique id; a host that differs from the group's majority is flagged with the majority's hosts named.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, Optional, Union

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._host.ib_counters import counter_max
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import pci_key
from ansible_collections.continuum.hydra.plugins.module_utils._results import gpu_name
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, PASS, WARN, severity

SECTION_CHECKS = {"ib": "network.ib_counters", "nvlink": "gpu.nvlink_errors", "aer": "system.pcie_aer"}
NVLINK_STATE_CHECK = "gpu.nvlink"
IB_PORTS_CHECK = "network.ib_ports"
FABRIC_CHECK = "gpu.fabric_state"
# Finding ids (findings.py keeps them per host and subject): the check id an action and a finding carry.
FINDING_IDS = {"ib": "interconnect.ib_errors", "nvlink": "interconnect.nvlink_errors", "aer": "interconnect.pcie_aer",
               "flap": "interconnect.flap", "peer": "interconnect.peer_ports", "domain": "interconnect.nvlink_domain"}
UNIT_SECONDS = {"second": 1.0, "minute": 60.0, "hour": 3600.0}
# NVLink counters judged together: the tools' names (gpus/nvlink_errors.py) -> the family a rule judges.
NVLINK_FAMILIES = {"replay_errors": "replay_recovery", "recovery_errors": "replay_recovery",
                   "crc_errors": "crc", "crc_flit_errors": "crc", "crc_data_errors": "crc"}
AER_SHORT = {"correctable": "c", "nonfatal": "nf", "fatal": "f"}
# Bounds of one host's stored reading: a host reporting more is cut (and says so in the reading: "cut").
MAX_PORTS, MAX_GPUS, MAX_DEVICES = 64, 32, 64
PEER_MIN_HOSTS = 3   # hosts of a class reading a port before its majority says what the port should be
MAX_ROWS = 200       # rows per list of the report section (worst first); the counts say how many there were
NAMED_PEERS = 3


# Every hydra_expect key's default, read once: _expect.table() copies the whole table, and reading() looks a host's
# thresholds up in it (once per threshold and host: 30 ms per host at fleet size when the table was copied each time).
_DEFAULTS: dict[str, Any] = dict((name, spec["default"]) for name, spec in _expect.table().items())


def _default(key: str) -> Any:
    """A threshold's default: its hydra_expect declaration (_expect.py) is the one place it is written."""
    return _DEFAULTS[key]


CLEAN_RUNS = _default("interconnect_clean_runs")   # for a finding whose host sent no thresholds


class Rule(NamedTuple):
    """A limit on one counter (family) of one kind of subject."""
    kind: str                 # ib, nvlink, aer
    counter: str              # the counter, or the NVLink family
    key: Optional[str]        # the hydra_expect key that overrides the limit (details.thresholds); None: fixed
    limit: float
    unit: str                 # count (increase between two runs), or per second / minute / hour
    status: str
    source: str


RULES: tuple[Rule, ...] = (
    Rule("ib", "link_downed", "ib_link_downed_max", _default("ib_link_downed_max"), "count", FAIL,
         "NVSentinel NIC monitor: any link_downed increment is fatal (running QPs cannot recover)"),
    Rule("ib", "symbol_error", "ib_symbol_error_per_hour", _default("ib_symbol_error_per_hour"), "hour", FAIL,
         "IBTA bit-error rate 1e-12 = 120 symbol errors per hour (NVSentinel symbol_error_fatal)"),
    Rule("ib", "link_error_recovery", "ib_link_error_recovery_per_minute", _default("ib_link_error_recovery_per_minute"), "minute", WARN,
         "NVSentinel: more than 5 per minute is a flapping link (Azure HPC health checks)"),
    Rule("ib", "port_rcv_errors", "ib_port_rcv_errors_per_second", _default("ib_port_rcv_errors_per_second"), "second", WARN,
         "NVSentinel: 10 per second"),
    Rule("ib", "port_xmit_discards", "ib_port_xmit_discards_per_second", _default("ib_port_xmit_discards_per_second"), "second",
         WARN, "NVSentinel: 100 per second"),
    Rule("ib", "local_link_integrity_errors", None, 0, "count", FAIL, "NVSentinel: any increment is fatal"),
    Rule("ib", "excessive_buffer_overrun_errors", None, 0, "count", FAIL,
         "NVSentinel: any increment is fatal (the lossless contract is broken)"),
    Rule("ib", "rnr_nak_retry_err", None, 0, "count", FAIL, "NVSentinel: any increment is fatal (the connection was severed)"),
    Rule("ib", "req_transport_retries_exceeded", None, 0, "count", FAIL, "NVSentinel: any increment is fatal (InfiniBand)"),
    Rule("ib", "roce_slow_restart", None, 10, "second", WARN, "NVSentinel: 10 per second"),
    Rule("ib", "local_ack_timeout_err", None, 1, "second", WARN, "NVSentinel: 1 per second"),
    Rule("nvlink", "replay_recovery", "nvlink_replay_recovery_max", _default("nvlink_replay_recovery_max"), "count", FAIL,
         "DCGM health watch: any NVLink replay or recovery error FAILs"),
    Rule("nvlink", "crc", "nvlink_crc_errors_per_second", _default("nvlink_crc_errors_per_second"), "second", FAIL,
         "DCGM: NVLink CRC errors matter from 100 per second (dcgm_gpu_hardware_limits.h)"),
    Rule("nvlink", "crc", None, 0, "count", WARN, "DCGM health watch: an NVLink CRC error below that rate WARNs"),
    Rule("aer", "fatal", None, 0, "count", FAIL, "any new uncorrectable (fatal) PCIe error"),
    Rule("aer", "nonfatal", None, 0, "count", FAIL, "any new uncorrectable (non-fatal) PCIe error"),
    Rule("aer", "correctable", "pcie_aer_correctable_per_minute", _default("pcie_aer_correctable_per_minute"), "minute", WARN,
         "DCGM: 8 PCIe replays per minute, the driver's recommended maximum (dcgm_gpu_hardware_limits.h)"),
)
REMEDIATION = {
    "ib": ("clean and reseat the cable of %s at both ends and check its transceiver and the switch port (`mlxlink -d <device> "
           "-p <port> --show_ber`, `ibdiagnet`); replace the cable or transceiver if the errors continue"),
    "nvlink": ("reset the GPU (drain it, `nvidia-smi -r -i <index>`) and run `dcgmi diag -r 2`; if %s errs again, the GPU "
               "board or NVLink baseboard needs service"),
    "aer": ("reseat %s (the card and its riser) and read its link (`lspci -vvv -s <address>`: LnkSta, CESta/UESta); "
            "replace the riser or the card if errors continue"),
    "flap": ("%s flapped: reseat the cable and transceiver at both ends, check the switch port's log, and watch link_downed "
             "over the next runs"),
    "peer": ("%s: check that the cable is plugged in and goes to the right switch port (compare with the peers named), then "
             "reseat or replace the cable and transceiver"),
    "domain": ("%s: check the rack's NVLink partition (the NVLink switch trays' fabric manager and IMEX), then reset the "
               "GPUs so they join the rack group's partition"),
}


def rules_table() -> list[dict[str, Any]]:
    """RULES as the report's ``rule`` list."""
    return [r._asdict() for r in RULES]


# ---------------------------------------------------------------- what doctor handed over

def _checks(entry: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    doctor = entry.get("doctor") if isinstance(entry.get("doctor"), Mapping) else None
    out: dict[str, Mapping[str, Any]] = {}
    for chk in (doctor or {}).get("checks") or []:
        if isinstance(chk, Mapping) and isinstance(chk.get("details"), Mapping) and chk.get("id"):
            out[str(chk["id"])] = chk
    return out


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _time(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


def _compact(fields: dict[str, Any], keep: Iterable[str] = ()) -> dict[str, Any]:
    """A stored record without its empty fields (no counter, nothing unreadable, no name): what it leaves out reads as
    empty. ``keep``: fields whose empty value says something (no NVLink link down) and whose None means unknown."""
    return dict((k, v) for k, v in fields.items() if (k in keep and v is not None) or (v not in (None, [], {})))


def _ib_reading(details: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    judged = set(r.counter for r in RULES if r.kind == "ib")
    ports: dict[str, Any] = {}
    cut = False
    for port in details.get("ports") or []:
        if not isinstance(port, Mapping):
            continue
        if len(ports) == MAX_PORTS:
            cut = True
            break
        counters: Mapping[str, Any] = port["counters"] if isinstance(port.get("counters"), Mapping) else {}
        unreadable: Mapping[str, Any] = port["unreadable"] if isinstance(port.get("unreadable"), Mapping) else {}
        saturated = [n for n in port.get("saturated") or [] if n in judged]
        ports["%s/%s" % (port.get("device"), port.get("port"))] = _compact({
            "s": port.get("state"), "r": port.get("rate_gbps"), "fw": port.get("fw_ver"),
            "c": dict((n, v) for n, v in counters.items() if n in judged and _count(v) and v),
            "u": sorted(n for n in unreadable if n in judged), "sat": sorted(saturated)})
    time = _time(details.get("read_at"))
    if time is None:
        return None
    return dict({"t": time, "p": ports}, **({"cut": True} if cut else {}))


def _gpu_key(gpu: Mapping[str, Any]) -> Optional[str]:
    """What a GPU of the NVLink reading is stored under: its UUID, else its PCI address (a GPU that `nvidia-smi nvlink
    -e` named by bus id and nvidia-smi did not list)."""
    if gpu.get("uuid"):
        return str(gpu["uuid"])
    return str(gpu["pci_bus_id"]) if pci_key(gpu.get("pci_bus_id")) else None


def _nvlink_reading(details: Mapping[str, Any], states: Optional[Mapping[str, Any]]) -> Optional[dict[str, Any]]:
    down_of: dict[str, list[str]] = {}
    for state in (states or {}).get("gpus") or []:
        if isinstance(state, Mapping):
            for key in (state.get("uuid"), pci_key(state.get("pci_bus_id"))):
                if key:
                    down_of.setdefault(str(key), sorted(str(n) for n in state.get("inactive") or []))
    gpus: dict[str, Any] = {}
    for gpu in details.get("readings") or []:
        key = _gpu_key(gpu) if isinstance(gpu, Mapping) else None
        if key is None or len(gpus) == MAX_GPUS:
            continue
        families: dict[str, dict[str, int]] = {}
        for link, counters in (gpu.get("errors") or {}).items():
            for name, value in (counters or {}).items():
                family = NVLINK_FAMILIES.get(name)
                if family and _count(value) and value:
                    families.setdefault(str(link), {})[family] = families.get(str(link), {}).get(family, 0) + value
        unreadable = sorted(set(str(what).split()[1] for what in gpu.get("unreadable") or {} if len(str(what).split()) > 2))
        down = next((down_of[k] for k in (key, pci_key(gpu.get("pci_bus_id"))) if k in down_of), None)
        gpus[key] = _compact({"i": gpu.get("index"), "n": len(gpu.get("links") or []), "c": families, "u": unreadable,
                              "down": down}, keep=("down",))
    time = _time(details.get("read_at"))
    return {"t": time, "g": gpus} if time is not None else None


def _aer_reading(details: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    devices: dict[str, Any] = {}
    for device in details.get("devices") or []:
        if not isinstance(device, Mapping) or not device.get("address") or len(devices) == MAX_DEVICES:
            continue
        unreadable: Mapping[str, Any] = device["unreadable"] if isinstance(device.get("unreadable"), Mapping) else {}
        devices[str(device["address"])] = _compact({
            "k": device.get("kind"), "g": device.get("gpu_index"), "nm": device.get("name"),
            "c": dict((AER_SHORT[s], device[s]) for s in AER_SHORT if _count(device.get(s)) and device[s]),
            "u": sorted(AER_SHORT[s] for s in AER_SHORT if s in unreadable or device.get(s) is None)})
    time = _time(details.get("read_at"))
    return {"t": time, "d": devices} if time is not None else None


def reading(entry: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The compact interconnect reading of one host entry of the report (what the history keeps); None without one.

    {boot, drv, lim: {threshold key: value}, ib: {t, p: {"dev/port": {s, r, fw, c, u, sat}}}, nvlink: {t, g: {uuid
    (else PCI address): {i, n, c: {link: {family: count}}, u, down}}}, aer: {t, d: {address: {k, g, nm, c, u}}}}: only
    non-zero judged counters are kept (a judged counter a reading does not name read 0), unreadable ones are named.
    """
    checks = _checks(entry)
    doctor: Mapping[str, Any] = entry["doctor"] if isinstance(entry.get("doctor"), Mapping) else {}
    environment: Mapping[str, Any] = doctor["environment"] if isinstance(doctor.get("environment"), Mapping) else {}
    out: dict[str, Any] = {"boot": environment.get("boot_id"), "drv": environment.get("driver_version"), "lim": {}}
    builders = {"ib": _ib_reading,
                "nvlink": lambda d: _nvlink_reading(d, (checks.get(NVLINK_STATE_CHECK) or {}).get("details")),
                "aer": _aer_reading}
    for kind, check_id in SECTION_CHECKS.items():
        chk = checks.get(check_id)
        if chk is None:
            continue
        section = builders[kind](chk["details"])
        if section is not None:
            out[kind] = section
            limits = chk["details"].get("thresholds")
            if isinstance(limits, Mapping):  # only the host's own values: the defaults are _expect's
                out["lim"].update((k, v) for k, v in limits.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
                                  and k in _DEFAULTS and v != _default(k))
    out = _compact(out)
    return out if any(kind in out for kind in SECTION_CHECKS) else None


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _counts_ok(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and _count(v) for k, v in value.items())


def reading_problem(value: Any) -> Optional[str]:
    """Why a stored reading cannot be compared with (None when it can): every field analyse_interconnect reads."""
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("lim", {}), dict):
        return "interconnect reading is not an object"
    for kind, subjects_key in (("ib", "p"), ("nvlink", "g"), ("aer", "d")):
        section = value.get(kind)
        if section is None:
            continue
        if not isinstance(section, dict) or _time(section.get("t")) is None or not isinstance(section.get(subjects_key), dict):
            return "interconnect %s reading: no time or no %s" % (kind, subjects_key)
        for name, subject in section[subjects_key].items():
            if not isinstance(subject, dict) or not _is_names(subject.get("u", [])):
                return "interconnect %s reading of %r is not an object" % (kind, name)
            counters = subject.get("c", {})
            if kind == "nvlink":
                if not isinstance(counters, dict) or not all(_counts_ok(c) for c in counters.values()):
                    return "interconnect nvlink reading of %r: counters of the wrong type" % name
                if subject.get("down") is not None and not _is_names(subject["down"]):
                    return "interconnect nvlink reading of %r: down links of the wrong type" % name
                # Links are numbers (the rows and flaps are ordered by them): a name that is not one is no link.
                for what, links in (("counters of", counters), ("unreadable", subject.get("u", [])),
                                    ("down", subject.get("down") or [])):
                    bad = sorted(link for link in links if not (link.isascii() and link.isdigit()))
                    if bad:
                        return "interconnect nvlink reading of %r: %s links that are not link numbers (%s)" % (
                            name, what, ", ".join(repr(link) for link in bad[:3]))
            elif not _counts_ok(counters) or (kind == "ib" and not _is_names(subject.get("sat", []))):
                return "interconnect %s reading of %r: counters of the wrong type" % (kind, name)
    return None


# ---------------------------------------------------------------- rates

def _limit(rule: Rule, limits: Mapping[str, Any]) -> float:
    value = limits.get(rule.key) if rule.key else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float(rule.limit)


def _rate(delta: int, seconds: float, unit: str) -> float:
    """The increase per unit, over at least one unit of time."""
    if unit == "count":
        return float(delta)
    return delta / max(seconds / UNIT_SECONDS[unit], 1.0)


def _judge(kind: str, counter: str, delta: int, seconds: float, limits: Mapping[str, Any]) -> dict[str, Any]:
    """The row of one increase: judged by the worst rule of the counter it breaks, else by the counter's first rule."""
    judged = [(rule, _limit(rule, limits), _rate(delta, seconds, rule.unit)) for rule in RULES
              if rule.kind == kind and rule.counter == counter]
    broken = [item for item in judged if item[2] > item[1]]
    rule, limit, rate = max(broken, key=lambda item: severity(item[0].status)) if broken else judged[0]
    return {"counter": counter, "delta": delta, "rate": rate, "unit": rule.unit, "limit": limit,
            "status": rule.status if broken else PASS, "ratio": rate / limit if limit > 0 else None, "source": rule.source}


def _subjects(kind: str, section: Mapping[str, Any]) -> Mapping[str, Any]:
    return section.get({"ib": "p", "nvlink": "g", "aer": "d"}[kind]) or {}


def _values(kind: str, subject: Mapping[str, Any]) -> Iterable[tuple[str, str, int, bool]]:
    """(where within the subject, counter, value, unreadable) of every judged counter the reading names: NVLink per
    link (a link with no counter named read 0), ports and PCI functions every judged counter (0 when not named)."""
    unreadable = subject.get("u", [])
    if kind == "nvlink":
        counters = subject.get("c", {})
        for link in sorted(set(counters) | set(unreadable), key=int):
            for family in sorted(set(NVLINK_FAMILIES.values())):
                yield "NVLink %s" % link, family, counters.get(link, {}).get(family, 0), link in unreadable
        return
    for name in sorted(set(r.counter for r in RULES if r.kind == kind)):
        key = AER_SHORT[name] if kind == "aer" else name
        yield "", name, subject.get("c", {}).get(key, 0), key in unreadable


def _gpu_subject(key: str, gpu: Mapping[str, Any]) -> str:
    """A GPU of the NVLink reading (keyed by _gpu_key(), its index under "i") as every format names it
    (_results.gpu_name)."""
    by_address = pci_key(key) is not None
    return gpu_name({"index": gpu.get("i"), "uuid": None if by_address else key, "pci_bus_id": key if by_address else None})


def _label(kind: str, name: str, subject: Mapping[str, Any]) -> str:
    if kind == "nvlink":
        return _gpu_subject(name, subject)
    if kind == "aer":
        what = "GPU %s" % subject["g"] if subject.get("g") is not None else subject.get("nm") or subject.get("k") or "device"
        return "%s (%s)" % (name, what)
    return name


def _compare(kind: str, host: str, name: str, now: Mapping[str, Any], before: Optional[Mapping[str, Any]], seconds: float,
             restart: Optional[str], limits: Mapping[str, Any], out: dict[str, list[dict[str, Any]]]) -> None:
    """The rows, resets and unknowns of one subject (a port, a GPU's links, a PCI function)."""
    label = _label(kind, name, now)
    if before is None:
        out["new"].append({"host": host, "kind": kind, "subject": label})
        return
    if restart is None and kind == "ib" and before.get("fw") != now.get("fw"):
        restart = "firmware %s -> %s" % (before.get("fw"), now.get("fw"))
    current = list(_values(kind, now))
    previous = dict(((where, counter), (value, unread)) for where, counter, value, unread in _values(kind, before))
    if kind == "nvlink":  # a link the last reading did not name read 0 then
        previous.update((((w, c), (0, False)) for w, c, _v, _u in current if (w, c) not in previous))
    lower = [(where, counter) for where, counter, value, unread in current
             if not unread and not previous.get((where, counter), (0, True))[1] and value < previous[(where, counter)][0]]
    if kind == "nvlink":
        lower += [(w, c) for (w, c), (v, u) in previous.items() if v and not u and not any(
            w == w2 and c == c2 for w2, c2, _v, _u in current)]
    if restart is None and lower:
        where, counter = lower[0]
        restart = "%s lower than the last run's (cleared, driver reloaded or wrapped)" % " ".join(p for p in (where, counter) if p)
    if restart is not None:
        out["resets"].append({"host": host, "kind": kind, "subject": label, "reason": restart})
        return
    for where, counter, value, unread in current:
        last, last_unread = previous.get((where, counter), (0, False))
        subject = " ".join(p for p in (label, where) if p)
        if unread or last_unread:
            out["unknown"].append({"host": host, "kind": kind, "subject": subject, "counter": counter,
                                   "reason": "unreadable %s" % ("now" if unread else "in the last run")})
            continue
        top = counter_max(counter) if kind == "ib" else None
        saturated_before = kind == "ib" and counter in before.get("sat", [])
        if saturated_before and top is not None and value >= top:
            out["unknown"].append({"host": host, "kind": kind, "subject": subject, "counter": counter,
                                   "reason": "saturated at %d since the last run: clear the counters (perfquery -x -R)" % top})
            continue
        delta = value - last
        if delta <= 0:
            continue
        row = _judge(kind, counter, delta, seconds, limits)
        row.update(host=host, kind=kind, subject=subject, interval_h=seconds / 3600.0,
                   at_least=bool(kind == "ib" and counter in now.get("sat", [])))
        out["rates"].append(row)


def _lifetime(kind: str, host: str, section: Mapping[str, Any], out: dict[str, list[dict[str, Any]]]) -> None:
    for name, subject in _subjects(kind, section).items():
        for where, counter, value, _unread in _values(kind, subject):
            if value:
                out["lifetime"].append({"host": host, "kind": kind, "subject": " ".join(
                    p for p in (_label(kind, name, subject), where) if p), "counter": counter, "value": value})


def _flaps(host: str, now: Mapping[str, Any], before: Mapping[str, Any], same_boot: bool) -> list[dict[str, Any]]:
    found = []
    ports_before = _subjects("ib", before.get("ib") or {})
    for name, port in _subjects("ib", now.get("ib") or {}).items():
        last = ports_before.get(name)
        if last is None:
            continue
        if last.get("s") and port.get("s") and last["s"] != port["s"]:
            found.append({"host": host, "kind": "ib", "subject": name, "change": "state %s -> %s" % (last["s"], port["s"])})
        elif same_boot and last.get("fw") == port.get("fw") and "link_downed" not in port.get("u", []):
            grew = port.get("c", {}).get("link_downed", 0) - last.get("c", {}).get("link_downed", 0)
            if grew > 0:
                found.append({"host": host, "kind": "ib", "subject": name, "change": "link_downed +%d" % grew})
    gpus_before = _subjects("nvlink", before.get("nvlink") or {})
    for uuid, gpu in _subjects("nvlink", now.get("nvlink") or {}).items():
        last = gpus_before.get(uuid)
        if last is None or last.get("down") is None or gpu.get("down") is None:
            continue
        went, came = sorted(set(gpu["down"]) - set(last["down"]), key=int), sorted(set(last["down"]) - set(gpu["down"]), key=int)
        if went or came:
            change = "; ".join(t for t in ("NVLink %s down" % ", ".join(went) if went else "",
                                           "NVLink %s up again" % ", ".join(came) if came else "") if t)
            found.append({"host": host, "kind": "nvlink", "subject": _gpu_subject(uuid, gpu), "change": change})
    return found


def _host_rates(host: str, now: Mapping[str, Any], before: Optional[Mapping[str, Any]], out: dict[str, list[dict[str, Any]]]) -> str:
    """Compare one host's reading with its previous one; returns how it was judged (first, compared, reset)."""
    if before is None:
        for kind in SECTION_CHECKS:
            if kind in now:
                _lifetime(kind, host, now[kind], out)
        return "first reading"
    rebooted = bool(now.get("boot") and before.get("boot") and now["boot"] != before["boot"])
    how = "reboot since the last run" if rebooted else "compared"
    for kind in SECTION_CHECKS:
        if kind not in now:
            continue
        if kind not in before:
            _lifetime(kind, host, now[kind], out)
            continue
        seconds = now[kind]["t"] - before[kind]["t"]
        restart = "reboot since the last run" if rebooted else None
        if restart is None and seconds <= 0:
            restart = "the reading is not later than the last run's"
        if restart is None and kind == "nvlink" and now.get("drv") and before.get("drv") and now["drv"] != before["drv"]:
            restart = "NVIDIA driver %s -> %s" % (before["drv"], now["drv"])
        last = _subjects(kind, before[kind])
        for name, subject in _subjects(kind, now[kind]).items():
            _compare(kind, host, name, subject, last.get(name), seconds, restart, now.get("lim") or {}, out)
    out["flaps"].extend(_flaps(host, now, before, not rebooted))
    return how


# ---------------------------------------------------------------- peers and the NVLink domain

def _port_states(section: Mapping[str, Any], shared: dict[Any, Any]) -> tuple[tuple[str, Any, Any], ...]:
    """A host's InfiniBand ports as the peer comparison reads them: (name, state, rate) each; hosts with the same
    ports share one tuple (``shared``), so a fleet's hosts hold next to nothing for it."""
    ports = tuple((name, port.get("s"), port.get("r")) for name, port in _subjects("ib", section).items())
    return shared.setdefault(ports, ports)


def _peer_ports(ports_of: Mapping[str, tuple[tuple[str, Any, Any], ...]], host_class: Mapping[str, Optional[str]]) -> list[dict[str, Any]]:
    """Ports down, missing or slower than on most hosts of the class (ports_of: _port_states() of each host read)."""
    by_class: dict[str, list[str]] = {}
    for host in ports_of:
        if host_class.get(host):
            by_class.setdefault(str(host_class[host]), []).append(host)
    views: dict[int, dict[str, tuple[Any, Any]]] = {}  # id of a shared ports tuple -> {name: (state, rate)}

    def view(host: str) -> dict[str, tuple[Any, Any]]:
        ports = ports_of[host]
        if id(ports) not in views:
            views[id(ports)] = dict((name, (state, rate)) for name, state, rate in ports)
        return views[id(ports)]

    found = []
    for klass, hosts in sorted(by_class.items()):
        if len(hosts) < PEER_MIN_HOSTS:
            continue
        names = sorted(set(n for h in hosts for n in view(h)))
        for name in names:
            ports = dict((h, view(h).get(name)) for h in hosts)  # (state, rate), None where the host has no such port
            active = [(h, p) for h, p in ports.items() if p and p[0] == "ACTIVE"]
            if len(active) * 2 < len(hosts):
                continue  # no majority says this port should be up (a spare, or cabled on few hosts)
            rates = Counter(p[1] for _h, p in active if p[1] is not None)
            expected = max(rates.items(), key=lambda kv: (kv[1], kv[0]))[0] if rates else None
            good = sorted(h for h, p in active if p[1] == expected)
            for host in sorted(hosts):
                port = ports[host]
                if port is None:
                    problem, status = "missing", FAIL
                elif port[0] != "ACTIVE":
                    problem, status = "%s" % port[0], FAIL
                elif expected is not None and port[1] is not None and port[1] < expected:
                    problem, status = "ACTIVE at %g Gb/s" % port[1], WARN
                else:
                    continue
                found.append({"host": host, "class": klass, "subject": name, "problem": problem, "expected_rate_gbps": expected,
                              "peers": [h for h in good if h != host][:NAMED_PEERS], "peers_up": len(active), "hosts": len(hosts),
                              "status": status})
    return found


def _fabric_rows(entry: Mapping[str, Any]) -> tuple[Optional[str], set[tuple[str, str]]]:
    chk = _checks(entry).get(FABRIC_CHECK)
    if chk is None:
        return None, set()
    details = chk["details"]
    pairs = set((str(g.get("cluster_uuid")), str(g.get("clique_id"))) for g in details.get("gpus") or []
                if isinstance(g, Mapping) and g.get("cluster_uuid") is not None)
    domain = details.get("nvlink_domain")
    return (str(domain) if domain else None), pairs


def _nvlink_domains(hosts: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(hosts off their rack group's cluster/clique, the groups): one cluster UUID and clique per nvlink_domain."""
    groups: dict[str, dict[str, set[tuple[str, str]]]] = {}
    for host in sorted(hosts):
        domain, pairs = _fabric_rows(hosts[host])
        if domain is not None:
            groups.setdefault(domain, {})[host] = pairs
    off, summary = [], []
    for domain, members in sorted(groups.items()):
        votes = Counter(next(iter(pairs)) for pairs in members.values() if len(pairs) == 1)
        if not votes:
            continue
        (cluster, clique), _n = max(votes.items(), key=lambda kv: (kv[1], kv[0]))
        agreeing = sorted(h for h, pairs in members.items() if pairs == {(cluster, clique)})
        summary.append({"domain": domain, "cluster_uuid": cluster, "clique_id": clique, "hosts": len(members),
                        "agreeing": len(agreeing)})
        for host, pairs in sorted(members.items()):
            if pairs == {(cluster, clique)}:
                continue
            seen = ", ".join("cluster %s clique %s" % p for p in sorted(pairs)) or "no fabric reading"
            off.append({"host": host, "domain": domain, "seen": seen, "expected_cluster_uuid": cluster, "expected_clique_id": clique,
                        "peers": [h for h in agreeing if h != host][:NAMED_PEERS], "status": FAIL})
    return off, summary


# ---------------------------------------------------------------- findings and actions

def _finding(host: str, check_id: str, subject: str, status: str, message: str, remediation: str,
             limits: Mapping[str, Any]) -> dict[str, Any]:
    clear = limits.get("interconnect_clean_runs")
    return {"host": host, "check_id": check_id, "subject": subject, "status": status, "message": message,
            "remediation": remediation, "clears_after": int(clear) if isinstance(clear, int) and clear > 0 else CLEAN_RUNS}


def _per_unit(row: Mapping[str, Any]) -> str:
    if row["unit"] == "count":
        return "+%d since the last run (%.1f h)" % (row["delta"], row["interval_h"])
    at_least = "at least " if row.get("at_least") else ""
    return "%s%s/%s over %.1f h (limit %g/%s)" % (at_least, _figure(row["rate"]), row["unit"], row["interval_h"], row["limit"],
                                                  row["unit"])


def _figure(value: float) -> str:
    return "%.3g" % value if value < 1000 else "%d" % round(value)


def _findings(section: Mapping[str, Any], limits_of: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for row in section["rates"]:
        if row["status"] == PASS:
            continue
        what = "%s %s" % (row["counter"], _per_unit(row))
        found.append(_finding(row["host"], FINDING_IDS[row["kind"]], row["subject"], row["status"], what,
                              REMEDIATION[row["kind"]] % row["subject"], limits_of.get(row["host"], {})))
    for flap in section["flaps"]:
        found.append(_finding(flap["host"], FINDING_IDS["flap"], flap["subject"], WARN, "%s since the last run" % flap["change"],
                              REMEDIATION["flap"] % flap["subject"], limits_of.get(flap["host"], {})))
    for peer in section["peers"]:
        expected = "ACTIVE at %g Gb/s" % peer["expected_rate_gbps"] if peer["expected_rate_gbps"] is not None else "ACTIVE"
        message = "%s is %s while %d of %d hosts of class %s have it %s (e.g. %s)" % (
            peer["subject"], peer["problem"], peer["peers_up"], peer["hosts"], peer["class"], expected, ", ".join(peer["peers"]) or "-")
        found.append(_finding(peer["host"], FINDING_IDS["peer"], peer["subject"], peer["status"], message,
                              REMEDIATION["peer"] % peer["subject"], limits_of.get(peer["host"], {})))
    for off in section["nvlink_domains"]["off"]:
        message = "GPUs report %s; NVLink domain %s: cluster %s clique %s (e.g. %s)" % (
            off["seen"], off["domain"], off["expected_cluster_uuid"], off["expected_clique_id"], ", ".join(off["peers"]) or "-")
        found.append(_finding(off["host"], FINDING_IDS["domain"], "NVLink domain %s" % off["domain"], FAIL, message,
                              REMEDIATION["domain"] % off["host"], limits_of.get(off["host"], {})))
    found.sort(key=lambda f: (-severity(f["status"]), f["host"], f["check_id"], f["subject"]))
    return found


def actions(findings: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One report action per (finding id, status): its hosts, the worst subject's step, every subject named."""
    grouped: dict[tuple[str, str], dict[str, Any]] = {}
    for item in findings:
        action = grouped.get((item["check_id"], item["status"]))
        if action is None:
            action = grouped[(item["check_id"], item["status"])] = {
                "check_id": item["check_id"], "status": item["status"], "hosts": set(), "subjects": [],
                "remediation": "%s %s: %s; %s" % (item["host"], item["subject"], item["message"], item["remediation"])}
        action["hosts"].add(item["host"])  # a set: one finding on 10,000 hosts is not a quadratic list search
        if len(action["subjects"]) < MAX_ROWS:
            action["subjects"].append("%s %s" % (item["host"], item["subject"]))
    out = []
    for action in grouped.values():
        action["hosts"] = sorted(action["hosts"])
        action["host_count"] = len(action["hosts"])
        out.append(action)
    return out


# ---------------------------------------------------------------- the section

def _worst_first(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Breaches first (FAIL, then WARN), each by how far over its limit (an any-increment limit counts as furthest)."""
    def key(row: Mapping[str, Any]) -> tuple[Any, ...]:
        over = row["ratio"] if row["ratio"] is not None else (float("inf") if row["status"] != PASS else 0.0)
        return (-severity(row["status"]), -over, row["host"], row["subject"], row["counter"])
    return sorted(rows, key=key)


def stored(value: Mapping[str, Any]) -> str:
    """A reading as the history snapshot keeps it: compact JSON text, which the fold holds as one string per host
    (a parsed reading costs about 7 times its text in memory) and only this run's hosts are parsed again."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _restored(host: str, value: Union[str, Mapping[str, Any], None], problems: list[str]) -> Optional[Mapping[str, Any]]:
    """A previous reading, parsed and checked; one that cannot be used is a problem line and no previous reading."""
    if value is None:
        return None
    try:
        parsed = value if isinstance(value, Mapping) else json.loads(value)
    except ValueError as exc:
        problems.append("interconnect: the last reading of %s in the history is not JSON (%s); judged as a first reading" % (host, exc))
        return None
    problem = reading_problem(parsed)
    if problem is not None:
        problems.append("interconnect: the last reading of %s in the history is unusable (%s); judged as a first reading" % (host, problem))
        return None
    return parsed


def analyse_interconnect(hosts: Mapping[str, Any], host_class: Mapping[str, Optional[str]],
                         previous: Optional[Mapping[str, Union[str, Mapping[str, Any]]]] = None,
                         stored_readings: Optional[dict[str, str]] = None) -> Optional[dict[str, Any]]:
    """The report's ``analysis.interconnect``: this run's readings against ``previous`` ({host: the last reading of
    the host in the history, as stored() wrote it or parsed}); None when no host read an interconnect counter and no
    host reports a fabric. An unusable previous reading is named in the section's ``problems``.

    One host at a time: its reading is judged against its previous one and only what the peer comparison needs of it
    is kept (a fleet's parsed readings held together cost about 8 KB a host). ``stored_readings``: when given, each
    host's reading as stored() writes it is put there (the history snapshot keeps it: history.snapshot())."""
    previous = previous or {}
    problems: list[str] = []
    out: dict[str, list[dict[str, Any]]] = {"rates": [], "resets": [], "unknown": [], "new": [], "lifetime": [], "flaps": []}
    judged: dict[str, str] = {}
    ports_of: dict[str, tuple[tuple[str, Any, Any], ...]] = {}
    limits_of: dict[str, Mapping[str, Any]] = {}
    shared: dict[Any, Any] = {}
    for host in sorted(hosts):
        entry = hosts[host]
        value = reading(entry) if isinstance(entry, Mapping) else None
        if value is None:
            continue
        if stored_readings is not None:
            stored_readings[host] = stored(value)
        judged[host] = _host_rates(host, value, _restored(host, previous.get(host), problems), out)
        if "ib" in value:
            ports_of[host] = _port_states(value["ib"], shared)
        if value.get("lim"):
            limits_of[host] = value["lim"]
    off, domains = _nvlink_domains(hosts)
    if not judged and not domains:
        return None
    peers = _peer_ports(ports_of, host_class)
    section: dict[str, Any] = {
        "rules": rules_table(),
        "hosts": judged,
        "rates": _worst_first(out["rates"]),
        "resets": out["resets"], "unknown": out["unknown"], "lifetime": sorted(out["lifetime"], key=lambda r: (-r["value"], r["host"])),
        "flaps": out["flaps"], "peers": peers, "nvlink_domains": {"off": off, "groups": domains}, "problems": problems,
    }
    section["findings"] = _findings(section, limits_of)
    section["actions"] = actions(section["findings"])
    section["counts"] = dict((key, len(section[key])) for key in ("rates", "resets", "unknown", "lifetime", "flaps", "peers"))
    for key in ("rates", "resets", "unknown", "lifetime", "flaps", "peers"):
        section[key] = section[key][:MAX_ROWS]
    return section


def hosts_read(section: Optional[Mapping[str, Any]]) -> set[str]:
    """The hosts whose interconnect was read this run (their open interconnect findings may count a clean run)."""
    return set((section or {}).get("hosts") or {})

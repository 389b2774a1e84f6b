# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Findings that last: a problem stays on record until someone acknowledges it, and a GPU fault that keeps
coming back climbs an escalation ladder.

A finding is one (host, check id, GPU UUID) - the GPU UUID when the check names GPUs in ``details.gpus``,
else none - for every WARN, FAIL or ERROR check of a doctor result. A check with ``blocked_by`` (its input
probe failed: the blocking check is the finding) is not a finding of its own; SKIP and PASS never are.

- ``first_seen`` / ``last_seen``: the run times (the report's ``generated_at``); ``times_seen`` counts runs;
  ``status`` is the worst status ever seen; ``message`` the latest.
- ``open`` stays true after the check turns healthy again, until acknowledged (``acknowledge()``, run by
  ``playbooks/acknowledge.yml``): acknowledging closes it and records ``acknowledged: {by, at, note}``.
  Seen again after that, it reopens (``acknowledged`` back to null, ``times_seen`` continues).
- Escalation, per GPU, for FAIL findings (a WARN or an unreadable value is no hardware fault): the host's
  boot id (``environment.boot_id``) is stored with each sighting; the same fault seen under a new boot id
  was seen again after a reboot. Level 1 (first boot): reset the GPU; after one reboot, level 2: reboot
  (the reset did not hold); after two, level 3: drain the host and open a hardware ticket (RMA).
  ``nvidia-smi -q -x`` carries no GPU reset count or time (``gpu_reset_status`` says a reset is *needed*,
  not that one happened), so only reboots move the ladder. Host-level findings have ``escalation: null``.
- Closed findings are dropped from the store once their acknowledgement is older than ``CLOSED_KEEP_DAYS``
  and they were not seen since.

``update()``, ``listing()`` and ``acknowledge()`` are pure; ``read_store`` / ``write_store`` do the file I/O
(the callback and the ``continuum.hydra.findings_ack`` action both run on the controller).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._atomic import write_atomic
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, PROBLEMS, severity, worst

STORE_NAME = "findings.json"
STORE_KIND = "continuum.hydra.findings"
STORE_SCHEMA_VERSION = "1.0.0"
CLOSED_KEEP_DAYS = 90
REBOOTS_KEPT = 5
# The ladder: level -> recommended action.
LADDER = {
    1: "reset the GPU (drain its jobs, then nvidia-smi -r -i <index>)",
    2: "reboot the host (the GPU reset did not hold)",
    3: "drain the host and open a hardware ticket (RMA) with the GPU's evidence",
}
# Level 1 for an AMD GPU (the doctor check names it with vendor "amd"): the amd-smi reset.
AMD_RESET = "reset the GPU (drain its jobs, then amd-smi reset --gpureset --gpu <index>)"

Key = tuple[str, str, str]


class AckError(ValueError):
    """Bad acknowledge input: the one-line message names the value."""


def empty_state() -> dict[str, Any]:
    return {"schema_version": STORE_SCHEMA_VERSION, "kind": STORE_KIND, "updated_at": None, "findings": []}


def _key(finding: Mapping[str, Any]) -> Key:
    return (finding["host"], finding["check_id"], finding.get("gpu_uuid") or "")


def _sightings(report: Mapping[str, Any]) -> Iterable[tuple[str, Optional[str], Mapping[str, Any], Optional[Mapping[str, Any]]]]:
    """(host, boot id, check, GPU ref or None) for every problem check of every doctor result of the run."""
    for host, entry in sorted((report.get("hosts") or {}).items()):
        doctor = (entry or {}).get("doctor")
        if not isinstance(doctor, dict):
            continue
        boot = ((doctor.get("environment") or {}).get("boot_id") or None)
        for chk in doctor.get("checks") or []:
            if not isinstance(chk, dict) or chk.get("status") not in PROBLEMS or chk.get("blocked_by"):
                continue
            gpus: list[Optional[Mapping[str, Any]]] = [
                g for g in (chk.get("details") or {}).get("gpus") or [] if isinstance(g, dict) and g.get("uuid")]
            for gpu in gpus or [None]:
                yield host, boot, chk, gpu


def _new(host: str, chk: Mapping[str, Any], gpu: Optional[Mapping[str, Any]], boot: Optional[str], now: str) -> dict[str, Any]:
    if gpu and gpu.get("vendor") == "amd":
        return dict(_new(host, chk, None, boot, now), gpu_uuid=gpu["uuid"], gpu_index=gpu.get("index"), gpu_vendor="amd")
    return {"host": host, "check_id": chk["id"], "gpu_uuid": gpu["uuid"] if gpu else None,
            "gpu_index": gpu.get("index") if gpu else None, "status": chk["status"], "message": chk.get("message") or "",
            "first_seen": now, "last_seen": now, "times_seen": 0, "open": True, "acknowledged": None,
            "boot_id": boot, "reboots": [], "escalation": None}


def escalation(finding: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The ladder step of a GPU FAIL finding: {level, action, why}; None for other findings."""
    if not finding.get("gpu_uuid") or finding.get("status") != FAIL:
        return None
    reboots = finding.get("reboots") or []
    level = min(1 + len(reboots), max(LADDER))
    if reboots:
        why = "%s again after reboot %s" % (finding["check_id"], str(reboots[-1].get("seen") or "")[:10])
        if len(reboots) > 1:
            why += " (seen after %d reboots since %s)" % (len(reboots), str(finding.get("first_seen") or "")[:10])
    else:
        why = "%s first seen %s; not seen after a reboot yet" % (finding["check_id"], str(finding.get("first_seen") or "")[:10])
    action = AMD_RESET if level == 1 and finding.get("gpu_vendor") == "amd" else LADDER[level]
    return {"level": level, "action": action, "why": why}


def _parse_time(text: Any) -> Optional[datetime.datetime]:
    try:
        when = datetime.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


def _expired(finding: Mapping[str, Any], now: Optional[datetime.datetime]) -> bool:
    ack = finding.get("acknowledged")
    if finding.get("open") or not isinstance(ack, dict) or now is None:
        return False
    acked = _parse_time(ack.get("at"))
    return acked is not None and now - acked > datetime.timedelta(days=CLOSED_KEEP_DAYS)


def update(previous: Mapping[str, Any], report: Mapping[str, Any], now: Optional[str] = None) -> dict[str, Any]:
    """The findings state after this run: ``previous`` (a store, possibly empty) folded with the run's doctor
    results. ``now`` defaults to the report's ``generated_at``. ``previous`` is not modified."""
    now = now or report.get("generated_at") or ""
    findings: dict[Key, dict[str, Any]] = {}
    for old in previous.get("findings") or []:
        if isinstance(old, dict) and old.get("host") and old.get("check_id"):
            findings[_key(old)] = dict(old, reboots=list(old.get("reboots") or []))
    seen_now: set[Key] = set()
    for host, boot, chk, gpu in _sightings(report):
        key = (host, chk["id"], (gpu or {}).get("uuid") or "")
        finding = findings.get(key)
        if finding is None:
            finding = findings[key] = _new(host, chk, gpu, boot, now)
        if key in seen_now:  # the same GPU named twice by one check: one sighting
            finding["status"] = worst([finding["status"], chk["status"]])
            continue
        seen_now.add(key)
        if not finding.get("open"):
            finding["open"], finding["acknowledged"] = True, None
        if boot and finding.get("boot_id") and boot != finding["boot_id"]:
            finding["reboots"] = (finding["reboots"] + [{"boot_id": boot, "seen": now}])[-REBOOTS_KEPT:]
        if boot:
            finding["boot_id"] = boot
        if gpu is not None and gpu.get("index") is not None:
            finding["gpu_index"] = gpu.get("index")
        finding["status"] = worst([finding.get("status") or chk["status"], chk["status"]])
        finding["message"] = chk.get("message") or ""
        finding["last_seen"] = now
        finding["times_seen"] = int(finding.get("times_seen") or 0) + 1
    clock = _parse_time(now)
    kept = [f for f in findings.values() if not _expired(f, clock)]
    for finding in kept:
        finding["escalation"] = escalation(finding)
    return {"schema_version": STORE_SCHEMA_VERSION, "kind": STORE_KIND, "updated_at": now, "findings": _ordered(kept)}


def _ordered(findings: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(findings, key=lambda f: (f["host"], f["check_id"], f.get("gpu_uuid") or ""))


def listing(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The report's ``findings``: open ones first, worst status first, then by host, check and GPU."""
    return sorted((dict(f) for f in state.get("findings") or []),
                  key=lambda f: (not f.get("open"), -severity(f.get("status") or FAIL), f["host"], f["check_id"], f.get("gpu_uuid") or ""))


def open_findings(findings: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [f for f in findings if f.get("open")]


def acknowledge(state: Mapping[str, Any], hosts: Iterable[str], checks: Iterable[str], by: str, at: str,
                note: str = "") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Close the open findings of ``hosts`` (only of ``checks`` when given). Returns (new state, the findings it
    closed). AckError when no host is given, or a host or check has no finding at all; a finding already
    closed is left as it is (acknowledging twice changes nothing)."""
    hosts = [str(h) for h in hosts if str(h).strip()]
    checks = [str(c) for c in checks if str(c).strip()]
    if not hosts:
        raise AckError("no hosts given: name at least one host in hydra_ack_hosts")
    findings = [dict(f) for f in state.get("findings") or []]
    for host in hosts:
        if not any(f["host"] == host for f in findings):
            raise AckError("no finding for host %r" % host)
    for check in checks:
        if not any(f["host"] in hosts and f["check_id"] == check for f in findings):
            raise AckError("no finding for check %r on %s" % (check, ", ".join(repr(h) for h in hosts)))
    closed = []
    for finding in findings:
        if finding["host"] in hosts and (not checks or finding["check_id"] in checks) and finding.get("open"):
            finding["open"] = False
            finding["acknowledged"] = {"by": by, "at": at, "note": note}
            closed.append(finding)
    return dict(state, findings=findings), closed


def describe(finding: Mapping[str, Any]) -> str:
    """One line naming a finding: host, check, GPU."""
    gpu = ""
    if finding.get("gpu_uuid"):
        gpu = " GPU %s %s" % (finding.get("gpu_index") if finding.get("gpu_index") is not None else "?", finding["gpu_uuid"])
    return "%s %s%s" % (finding["host"], finding["check_id"], gpu)


# File I/O: the store beside the history snapshots.

def store_path(directory: str) -> str:
    return os.path.join(directory, STORE_NAME)


def read_store(path: str, problems: list[str], now: Optional[datetime.datetime] = None) -> dict[str, Any]:
    """The stored state; empty when there is none. An unreadable store is one line in ``problems``, is renamed
    aside (``<name>.bad-<time>``, never lost) and the state starts empty."""
    try:
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
    except FileNotFoundError:
        return empty_state()
    except (OSError, ValueError) as exc:
        return _set_aside(path, problems, " ".join(str(exc).split()), now)
    if not isinstance(state, dict) or state.get("kind") != STORE_KIND or not isinstance(state.get("findings"), list) \
            or not all(isinstance(f, dict) and f.get("host") and f.get("check_id") for f in state["findings"]):
        return _set_aside(path, problems, "not a %s store" % STORE_KIND, now)
    return state


def _set_aside(path: str, problems: list[str], why: str, now: Optional[datetime.datetime]) -> dict[str, Any]:
    now = now or datetime.datetime.now(datetime.timezone.utc)
    aside = "%s.bad-%s" % (path, now.strftime("%Y%m%dT%H%M%S.%fZ"))
    try:
        os.replace(path, aside)
        problems.append("findings: %s is unreadable (%s); kept as %s, starting empty" % (path, why, aside))
    except OSError as exc:
        problems.append("findings: %s is unreadable (%s) and could not be set aside (%s); starting empty" % (path, why, exc))
    return empty_state()


def write_store(path: str, state: Mapping[str, Any]) -> None:
    write_atomic(path, json.dumps(state, indent=1, sort_keys=True) + "\n")

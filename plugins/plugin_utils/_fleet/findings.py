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
- ``runs``: per run, how many findings it opened (new or reopened), how many were closed since the run before
  (acknowledged, or cleared by themselves) and how many are open after it; the last ``RUNS_KEPT``, for the report's
  timeline (``timeline()``: the report's ``findings_timeline``). A few numbers per run, none per host.
- Interconnect findings (the fleet analysis's rates, flaps, peer ports and NVLink domains: report
  ``analysis.interconnect.findings``, _fleet/interconnect.py) are one (host, id, ``subject``: the port, link or
  device). They close themselves after ``clears_after`` runs in a row that read the host's interconnect without
  them (``clean_runs`` counts; acknowledged ``by`` continuum.hydra), and reopen when seen again. One seen
  REPEAT_EVENTS times within REPEAT_WINDOW (NVSentinel's rule: 3 degradation events in an hour escalate) gets
  escalation level 3 (``sightings`` keeps the last run times).

``update()``, ``listing()`` and ``acknowledge()`` are pure; ``read_store`` / ``write_store`` do the file I/O
(the callback and the ``continuum.hydra.findings_ack`` action both run on the controller).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import json
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._atomic import write_atomic
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, PROBLEMS, severity, worst
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import state_files
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.interconnect import hosts_read

STORE_NAME = "findings.json"
STORE_KIND = "continuum.hydra.findings"
STORE_SCHEMA_VERSION = "1.0.0"
CLOSED_KEEP_DAYS = 90
REBOOTS_KEPT = 5
RUNS_KEPT = 20  # runs of the findings timeline the store keeps
# The ladder: level -> recommended action.
LADDER = {
    1: "reset the GPU (drain its jobs, then nvidia-smi -r -i <index>)",
    2: "reboot the host (the GPU reset did not hold)",
    3: "drain the host and open a hardware ticket (RMA) with the GPU's evidence",
}
# Repeated interconnect degradation escalates: NVSentinel's NIC monitor, 3 non-fatal events in 1 hour.
REPEAT_EVENTS = 3
REPEAT_WINDOW = datetime.timedelta(hours=1)
CLEARED_BY = "continuum.hydra"
# Level 1 for an AMD GPU (the doctor check names it with vendor "amd"): the amd-smi reset.
AMD_RESET = "reset the GPU (drain its jobs, then amd-smi reset --gpureset --gpu <index>)"

Key = tuple[str, str, str]


class AckError(ValueError):
    """Bad acknowledge input: the one-line message names the value."""


def empty_state() -> dict[str, Any]:
    return {"schema_version": STORE_SCHEMA_VERSION, "kind": STORE_KIND, "updated_at": None, "findings": []}


def _key(finding: Mapping[str, Any]) -> Key:
    return (finding["host"], finding["check_id"], finding.get("gpu_uuid") or finding.get("subject") or "")


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


def _repeated(finding: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """Level 3 for an interconnect finding seen REPEAT_EVENTS times within REPEAT_WINDOW; None otherwise."""
    times = [t for t in (state_files.parse_time(x) for x in finding.get("sightings") or []) if t is not None][-REPEAT_EVENTS:]
    if len(times) < REPEAT_EVENTS or times[-1] - times[0] > REPEAT_WINDOW:
        return None
    return {"level": max(LADDER), "action": "drain the host and replace the cable, transceiver or card of %s (open a ticket "
            "with the vendor if it is the card)" % finding.get("subject"),
            "why": "%s on %s %d times within %s (NVSentinel's repeat rule: %d events in an hour escalate)" % (
                finding["check_id"], finding.get("subject"), len(times), times[-1] - times[0], REPEAT_EVENTS)}


def escalation(finding: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The ladder step of a GPU FAIL finding: {level, action, why}; an interconnect finding's repeat escalation;
    None for other findings."""
    if finding.get("subject"):
        return _repeated(finding)
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


def _expired(finding: Mapping[str, Any], now: Optional[datetime.datetime]) -> bool:
    ack = finding.get("acknowledged")
    if finding.get("open") or not isinstance(ack, dict) or now is None:
        return False
    acked = state_files.parse_time(ack.get("at"))
    return acked is not None and now - acked > datetime.timedelta(days=CLOSED_KEEP_DAYS)


def update(previous: Mapping[str, Any], report: Mapping[str, Any], now: Optional[str] = None, owned: bool = False) -> dict[str, Any]:
    """The findings state after this run: ``previous`` (a store, possibly empty) folded with the run's doctor
    results. ``now`` defaults to the report's ``generated_at``. ``previous`` is not modified, unless ``owned``: its
    findings are then changed in place and become the new state's (a store just read, which nothing else holds: a
    fleet's findings are not copied)."""
    now = now or report.get("generated_at") or ""
    findings: dict[Key, dict[str, Any]] = {}
    for old in previous.get("findings") or []:
        if isinstance(old, dict) and old.get("host") and old.get("check_id"):
            if owned:
                old["reboots"] = list(old.get("reboots") or [])
                findings[_key(old)] = old
            else:
                findings[_key(old)] = dict(old, reboots=list(old.get("reboots") or []))
    seen_now: set[Key] = set()
    was_open = set(key for key, finding in findings.items() if finding.get("open"))
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
    _interconnect(findings, report, now)
    clock = state_files.parse_time(now)
    kept = [f for f in findings.values() if not _expired(f, clock)]
    for finding in kept:
        finding["escalation"] = escalation(finding)
    run = {"at": now, "opened": sum(1 for key, f in findings.items() if f.get("open") and key not in was_open),
           "closed": _closed_since(kept, state_files.parse_time(previous.get("updated_at"))),
           "open": sum(1 for f in kept if f.get("open"))}
    return {"schema_version": STORE_SCHEMA_VERSION, "kind": STORE_KIND, "updated_at": now, "findings": _ordered(kept),
            "runs": (list(previous.get("runs") or []) + [run])[-RUNS_KEPT:]}


def _closed_since(findings: Iterable[Mapping[str, Any]], since: Optional[datetime.datetime]) -> int:
    """Closed findings acknowledged (or cleared) after ``since``, the run before (all of them without one)."""
    count = 0
    for finding in findings:
        ack = finding.get("acknowledged")
        when = state_files.parse_time(ack.get("at")) if isinstance(ack, dict) and not finding.get("open") else None
        if when is not None and (since is None or when > since):
            count += 1
    return count


def timeline(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The report's ``findings_timeline``: the store's runs, oldest first ({at, opened, closed, open})."""
    return [dict(run) for run in state.get("runs") or []]


def _interconnect(findings: dict[Key, dict[str, Any]], report: Mapping[str, Any], now: str) -> None:
    """Fold the run's interconnect findings in; close an open one whose host was read again without it ``clears_after``
    runs in a row."""
    section = ((report.get("analysis") or {}).get("interconnect")) or {}
    seen: set[Key] = set()
    for item in section.get("findings") or []:
        key = (item["host"], item["check_id"], item["subject"])
        finding = findings.get(key)
        if finding is None:
            boot = ((((report.get("hosts") or {}).get(item["host"]) or {}).get("doctor") or {}).get("environment") or {}).get("boot_id")
            finding = findings[key] = _new(item["host"], {"id": item["check_id"], "status": item["status"]}, None, boot, now)
            finding["subject"] = item["subject"]
        if key in seen:
            finding["status"] = worst([finding["status"], item["status"]])
            continue
        seen.add(key)
        if not finding.get("open"):
            finding["open"], finding["acknowledged"] = True, None
        finding.update(status=worst([finding.get("status") or item["status"], item["status"]]), message=item["message"],
                       last_seen=now, times_seen=int(finding.get("times_seen") or 0) + 1, clears_after=item["clears_after"],
                       clean_runs=0, sightings=(list(finding.get("sightings") or []) + [now])[-REPEAT_EVENTS:])
    read = hosts_read(section)
    for key, finding in findings.items():
        if key in seen or not finding.get("open") or not finding.get("clears_after") or finding["host"] not in read:
            continue
        finding["clean_runs"] = int(finding.get("clean_runs") or 0) + 1
        if finding["clean_runs"] >= finding["clears_after"]:
            finding["open"] = False
            finding["acknowledged"] = {"by": CLEARED_BY, "at": now,
                                       "note": "cleared itself after %d clean runs" % finding["clean_runs"]}


def _ordered(findings: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(findings, key=lambda f: (f["host"], f["check_id"], f.get("gpu_uuid") or ""))


def listing(state: Mapping[str, Any], shared: bool = False) -> list[dict[str, Any]]:
    """The report's ``findings``: open ones first, worst status first, then by host, check and GPU. Copies of the
    state's findings, or with ``shared`` the state's own (a caller that drops the state: no second copy of them)."""
    return sorted((f if shared else dict(f) for f in state.get("findings") or []),
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
    # Sets: an acknowledgement of thousands of hosts against a 100,000-host store stays one pass over it.
    named_hosts, named_checks = set(hosts), set(checks)
    with_findings = set(f["host"] for f in findings)
    for host in hosts:
        if host not in with_findings:
            raise AckError("no finding for host %r" % host)
    found_checks = set(f["check_id"] for f in findings if f["host"] in named_hosts)
    for check in checks:
        if check not in found_checks:
            raise AckError("no finding for check %r on %s" % (check, ", ".join(repr(h) for h in hosts)))
    closed = []
    for finding in findings:
        if finding["host"] in named_hosts and (not checks or finding["check_id"] in named_checks) and finding.get("open"):
            finding["open"] = False
            finding["acknowledged"] = {"by": by, "at": at, "note": note}
            closed.append(finding)
    return dict(state, findings=findings), closed


def describe(finding: Mapping[str, Any]) -> str:
    """One line naming a finding: host, check, GPU (or the port, link or device of an interconnect finding)."""
    gpu = ""
    if finding.get("gpu_uuid"):
        gpu = " GPU %s %s" % (finding.get("gpu_index") if finding.get("gpu_index") is not None else "?", finding["gpu_uuid"])
    if finding.get("subject"):
        gpu = " %s" % finding["subject"]
    return "%s %s%s" % (finding["host"], finding["check_id"], gpu)


# File I/O: the store beside the history snapshots.

def store_path(directory: str) -> str:
    return os.path.join(directory, STORE_NAME)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_time(value: Any) -> bool:
    return isinstance(value, str) and state_files.parse_time(value) is not None


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _is_ack(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and isinstance(value.get("by"), str) and _is_time(value.get("at"))
                             and isinstance(value.get("note"), str))


def _is_reboots(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(r, dict) and isinstance(r.get("boot_id"), str) and isinstance(r.get("seen"), str) for r in value)


def _is_escalation(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and value.get("level") in LADDER and not isinstance(value.get("level"), bool)
                             and isinstance(value.get("action"), str) and isinstance(value.get("why"), str))


# Every field of a stored finding: (accepted?, what is accepted). update(), listing() and acknowledge() read them all.
FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "host": (_is_text, "a non-empty string"),
    "check_id": (_is_text, "a non-empty string"),
    "gpu_uuid": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "gpu_index": (lambda v: v is None or _is_count(v), "a GPU index (a whole number >= 0) or null"),
    "status": (lambda v: v in PROBLEMS, "one of %s" % ", ".join(PROBLEMS)),
    "message": (lambda v: isinstance(v, str), "a string"),
    "first_seen": (_is_time, "an ISO 8601 time"),
    "last_seen": (_is_time, "an ISO 8601 time"),
    "times_seen": (_is_count, "a count (a whole number >= 0)"),
    "open": (lambda v: isinstance(v, bool), "true or false"),
    "acknowledged": (_is_ack, "null or {by, at, note} (strings, at an ISO 8601 time)"),
    "boot_id": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "reboots": (_is_reboots, "a list of {boot_id, seen} (strings)"),
    "escalation": (_is_escalation, "null or {level, action, why} (level 1 to %d)" % max(LADDER)),
}
OPTIONAL_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "gpu_vendor": (lambda v: v is None or isinstance(v, str), "a string or null"),
    # interconnect findings (_interconnect above)
    "subject": (lambda v: v is None or _is_text(v), "a non-empty string or null"),
    "clears_after": (lambda v: v is None or (_is_count(v) and v > 0), "a number of runs (a whole number >= 1) or null"),
    "clean_runs": (_is_count, "a count (a whole number >= 0)"),
    "sightings": (lambda v: isinstance(v, list) and all(_is_time(t) for t in v), "a list of ISO 8601 times"),
}


def _is_run(value: Any) -> bool:
    return isinstance(value, dict) and _is_time(value.get("at")) and all(_is_count(value.get(k)) for k in ("opened", "closed", "open"))


def store_problem(state: Any) -> Optional[str]:
    """Why a parsed store cannot be used (None when it can): every field of every finding is checked, so one bad
    value is found here, once, instead of breaking every later run."""
    if not isinstance(state, dict) or state.get("kind") != STORE_KIND or not isinstance(state.get("findings"), list):
        return "not a %s store" % STORE_KIND
    runs = state.get("runs", [])
    for number, run in enumerate(runs if isinstance(runs, list) else [runs], 1):
        if not _is_run(run):
            shown = json.dumps(run, default=str, sort_keys=True)
            return "runs: entry %d, %s, is not {at: an ISO 8601 time, opened, closed, open: counts}" % (
                number, shown if len(shown) <= 80 else shown[:77] + "...")
    for number, item in enumerate(state["findings"], 1):
        if not isinstance(item, dict):
            return "finding %d: %r is not an object" % (number, _short(item))
        for name, (accepted, what) in list(FIELDS.items()) + list(OPTIONAL_FIELDS.items()):
            if name not in item:
                if name in FIELDS:
                    return "finding %d: no %s" % (number, name)
                continue
            if not accepted(item[name]):
                where = "finding %d (%s %s)" % (number, _short(item.get("host")), _short(item.get("check_id")))
                return "%s: %s: %r is not %s" % (where, name, _short(item[name]), what)
    return None


def _short(value: Any) -> Any:
    text = repr(value)
    return value if len(text) <= 80 else text[:77] + "..."


def load_store(path: str, now: Optional[datetime.datetime] = None, set_aside: bool = True,
               timeout: float = state_files.READ_TIMEOUT_S) -> tuple[dict[str, Any], Optional[str], Optional[str]]:
    """(state, problem, aside): the stored state, empty when there is none. A store that cannot be used (not JSON,
    a field of the wrong type, a FIFO) is renamed aside to ``<name>.bad-<time>`` (never lost; ``aside`` is its new
    path) and the state starts empty; ``problem`` is one line saying so. A read past ``timeout`` leaves the file
    where it is (ReadTimedOut is raised: the caller does not write either). ``set_aside`` False only reads."""
    try:
        state = json.loads(state_files.read_text(path, timeout))
    except FileNotFoundError:
        return empty_state(), None, None
    except state_files.ReadTimedOut:
        raise
    except (OSError, ValueError) as exc:
        why = " ".join(str(exc).split())
    else:
        problem = store_problem(state)
        if problem is None:
            return state, None, None
        why = problem
    if not set_aside:
        return empty_state(), "findings: %s is unusable (%s)" % (path, why), None
    now = now or datetime.datetime.now(datetime.timezone.utc)
    aside = "%s.bad-%s" % (path, now.strftime("%Y%m%dT%H%M%S.%fZ"))
    try:
        os.replace(path, aside)
    except OSError as exc:
        return empty_state(), "findings: %s is unusable (%s) and could not be set aside (%s); starting empty" % (
            path, why, exc.strerror or exc), None
    return empty_state(), "findings: %s is unusable (%s); kept as %s, starting empty" % (path, why, aside), aside


def read_store(path: str, problems: list[str], now: Optional[datetime.datetime] = None) -> dict[str, Any]:
    """load_store()'s state; its problem, if any, appended to ``problems``."""
    state, problem, _aside = load_store(path, now)
    if problem:
        problems.append(problem)
    return state


def update_store(path: str, report: Mapping[str, Any], now: datetime.datetime,
                 lock_wait_s: float = state_files.DEFAULT_LOCK_WAIT_S) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fold the run ``report`` into the store at ``path`` under its lock. Returns (the new state, ``store``: the
    report's ``findings_store`` - {path, updated, set_aside, problems}).

    Another run holding the lock for ``lock_wait_s`` seconds, or a read past its deadline, leaves the store as it is
    (updated false, one problem line): the state returned is then this run folded into what could be read."""
    store: dict[str, Any] = {"path": path, "updated": False, "set_aside": None, "problems": []}
    state: Optional[dict[str, Any]] = None
    previous: Optional[dict[str, Any]] = None
    try:
        with state_files.locked(path, lock_wait_s):
            previous, problem, store["set_aside"] = load_store(path, now)
            if problem:
                store["problems"].append(problem)
            state = update(previous, report, owned=True)  # just read: its findings become the new state's
            write_store(path, state)
            store["updated"] = True
    except state_files.ReadTimedOut as exc:
        store["problems"].append("findings: %s not updated: %s" % (path, " ".join(str(exc).split())))
        previous = empty_state()  # a second read would wait as long again
    except OSError as exc:  # Locked, a lock file that is no regular file, a write that failed
        store["problems"].append("findings: %s not updated: %s" % (path, " ".join(str(exc).split())))
    if state is None:
        if previous is None:
            # What the store holds (writes are atomic: a read without the lock sees a whole store) plus this run.
            try:
                previous = load_store(path, now, set_aside=False)[0]
            except state_files.ReadTimedOut:
                previous = empty_state()
        state = update(previous, report)
    return state, store


def write_store(path: str, state: Mapping[str, Any]) -> None:
    write_atomic(path, state_files.json_text(state))

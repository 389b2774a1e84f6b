# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Screening rotation and coverage across runs (pure; the store's file I/O at the bottom).

playbooks/screen.yml screens at most K nodes a run (the screen_plan action chooses them: never screened first, then
the ones screened longest ago); the fleet report says whether every node was screened within N days, and which are
overdue by how long. What each node's last screen was is kept in ``screening.json`` beside the history (the
callback's history_dir), under the same lock discipline as the findings store (_fleet/state_files.py).

The store: {"version": 1, "nodes": {host: {"last_screened", "last_attempt", "status", "reason", "job_id"}}};
``last_screened`` is when a job last ran on the node and judged it (an ISO time, or null), ``last_attempt`` the last
try whatever came of it, ``status`` the node's verdict then or ``not_screened``, ``reason`` why not.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import json
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._atomic import write_atomic
from ansible_collections.continuum.hydra.plugins.module_utils._status import NOT_SCREENED
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import state_files

STORE_NAME = "screening.json"
STORE_VERSION = 1
DEFAULT_MAX_NODES = 10
DEFAULT_MAX_AGE_DAYS = 7.0


class CoverageError(ValueError):
    """Bad rotation settings: one line naming the value."""


def empty() -> dict[str, Any]:
    return {"version": STORE_VERSION, "nodes": {}}


def check_settings(max_nodes: Any, max_age_days: Any) -> None:
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1:
        raise CoverageError("max_nodes: %r is not a whole number >= 1" % (max_nodes,))
    if isinstance(max_age_days, bool) or not isinstance(max_age_days, (int, float)) or not math.isfinite(max_age_days) \
            or max_age_days <= 0:
        raise CoverageError("max_age_days: %r is not a positive number of days" % (max_age_days,))


def order(candidates: Iterable[str], store: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every candidate node with its last screen, in screening order: never screened first, then the ones screened
    longest ago (by name where equal)."""
    nodes = store.get("nodes") or {}
    rows = [{"host": host, "last_screened": (nodes.get(host) or {}).get("last_screened")} for host in sorted(set(candidates))]
    epoch = datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)
    return sorted(rows, key=lambda row: (state_files.parse_time(row["last_screened"]) or epoch, row["host"]))


def choose(candidates: Iterable[str], store: Mapping[str, Any], max_nodes: int) -> list[str]:
    """The at most ``max_nodes`` nodes to screen this run (order()'s first)."""
    return [row["host"] for row in order(candidates, store)[:max_nodes]]


def record(store: Mapping[str, Any], screens: Mapping[str, Mapping[str, Any]], now: str) -> dict[str, Any]:
    """The store with this run's screens: {host: {screened, judged, status, reason, job_id, ended_at}} (a node not
    screened, or whose job gave no result to judge - ``judged`` false: sbatch failed, the job died -, keeps its
    last_screened). Pure: returns a new store."""
    nodes: dict[str, dict[str, Any]] = dict((h, dict(v)) for h, v in (store.get("nodes") or {}).items())
    for host, screen in sorted(screens.items()):
        entry = nodes.setdefault(host, {"last_screened": None})
        entry.update(last_attempt=now, job_id=screen.get("job_id"), reason=screen.get("reason"))
        if screen.get("screened") and screen.get("judged", True):
            entry.update(last_screened=screen.get("ended_at") or now, status=screen.get("status"))
        else:
            entry["status"] = NOT_SCREENED
    return {"version": STORE_VERSION, "nodes": nodes}


def coverage(store: Mapping[str, Any], candidates: Iterable[str], screens: Mapping[str, Mapping[str, Any]],
             max_age_days: float, now: datetime.datetime) -> dict[str, Any]:
    """The report's ``screening`` section: this run's screens, and whether every candidate node was screened within
    ``max_age_days`` (the store as this run left it): the overdue ones by how long, the never screened, and each
    screened node's age (seconds since its last screen, at ``now``: the Prometheus gauge)."""
    nodes = store.get("nodes") or {}
    limit = datetime.timedelta(days=max_age_days)
    overdue, never, within = [], [], 0
    ages: dict[str, int] = {}
    for host in sorted(set(candidates) | set(nodes)):
        last = state_files.parse_time((nodes.get(host) or {}).get("last_screened"))
        if last is None:
            never.append(host)
            continue
        ages[host] = round((now - last).total_seconds())
        if now - last > limit:
            overdue.append({"host": host, "last_screened": nodes[host]["last_screened"],
                            "overdue_by_s": round((now - last - limit).total_seconds())})
        else:
            within += 1
    overdue.sort(key=lambda row: (-row["overdue_by_s"], row["host"]))
    return {
        "max_age_days": max_age_days,
        "nodes": within + len(overdue) + len(never),
        "within": within,
        "overdue": overdue,
        "never": never,
        "covered": not overdue and not never,
        "screened_age_s": ages,
        "screened": sorted(host for host, screen in screens.items() if screen.get("screened")),
        "not_screened": [{"host": host, "reason": screen.get("reason")} for host, screen in sorted(screens.items())
                         if not screen.get("screened")],
    }


def overdue_line(section: Mapping[str, Any]) -> Optional[str]:
    """One line for the report's problems when coverage is not met; None when every node was screened in time."""
    if section["covered"]:
        return None
    parts = []
    if section["overdue"]:
        worst = section["overdue"][0]
        parts.append("%d overdue (longest: %s by %.1f days)" % (len(section["overdue"]), worst["host"], worst["overdue_by_s"] / 86400.0))
    if section["never"]:
        more = ", ..." if len(section["never"]) > 5 else ""
        parts.append("%d never screened (%s%s)" % (len(section["never"]), ", ".join(section["never"][:5]), more))
    return "screening: %d of %d nodes screened within %g days; %s" % (
        section["within"], section["nodes"], section["max_age_days"], "; ".join(parts))


# ---------------------------------------------------------------- the store (file I/O)

def store_path(history_dir: str) -> str:
    return "%s/%s" % (history_dir.rstrip("/"), STORE_NAME)


def store_problem(store: Any) -> Optional[str]:
    """Why a read store cannot be used (one line), None when it can."""
    if not isinstance(store, dict) or store.get("version") != STORE_VERSION or not isinstance(store.get("nodes"), dict):
        return "not a screening store of version %d" % STORE_VERSION
    for host, entry in store["nodes"].items():
        if not isinstance(entry, dict) or (entry.get("last_screened") is not None and state_files.parse_time(entry["last_screened"]) is None):
            return "node %r: %r is not a record with a last_screened time" % (host, entry)
    return None


def read_store(path: str, timeout: float = state_files.READ_TIMEOUT_S) -> tuple[dict[str, Any], Optional[str]]:
    """(store, why it cannot be used or None): the stored store, empty when there is none or it cannot be used.
    ReadTimedOut is raised (the file is left where it is)."""
    try:
        store = json.loads(state_files.read_text(path, timeout))
    except FileNotFoundError:
        return empty(), None
    except state_files.ReadTimedOut:
        raise
    except (OSError, ValueError) as exc:
        return empty(), " ".join(str(exc).split())
    problem = store_problem(store)
    return (empty(), problem) if problem else (store, None)


def update_store(path: str, screens: Mapping[str, Mapping[str, Any]], now: datetime.datetime,
                 lock_wait_s: float = state_files.DEFAULT_LOCK_WAIT_S) -> tuple[dict[str, Any], list[str]]:
    """Record this run's screens in the store at ``path`` under its lock: (the store as it now is, problems). A store
    that cannot be used is kept aside as ``<name>.bad-<time>`` (never lost) and the record starts anew. Locked out or
    unwritable: nothing is written, one problem line, and the store returned is what could be read plus this run."""
    problems: list[str] = []
    stamp = now.isoformat(timespec="seconds")
    previous: dict[str, Any] = empty()
    try:
        with state_files.locked(path, lock_wait_s):
            previous, why = read_store(path)
            if why:
                aside = "%s.bad-%s" % (path, now.strftime("%Y%m%dT%H%M%S.%fZ"))
                os.replace(path, aside)
                problems.append("screening: %s is unusable (%s); kept as %s, starting from no screen" % (path, why, aside))
            store = record(previous, screens, stamp)
            write_atomic(path, json.dumps(store, indent=1, sort_keys=True) + "\n")
            return store, problems
    except OSError as exc:  # Locked, a read past its deadline, a store that could not be set aside, a failed write
        problems.append("screening: %s not updated: %s" % (path, " ".join(str(exc).split())))
    return record(previous, screens, stamp), problems

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Sliced runs (AWX job slicing): one part per slice, merged into one fleet report (no I/O but list_part_files).

A slice of an AWX workflow carries ``awx_workflow_job_id`` (shared by the slices) and its own ``awx_job_id``; the
fleet_report callback then writes ``<report_dir>/parts/<workflow id>/job-<job id>.json`` (build_part) instead of the
shared report, and doctor.yml publishes part_summary as the job's artifact. playbooks/merge.yml merges both kinds
(merge): every host of the full inventory found in no part is MISSING. See docs/awx.md.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import ALL_HOST_STATUSES, MISSING

PART_KIND = "continuum.hydra.fleet_part"
PART_SCHEMA_VERSION = "1.0.0"
PARTS_DIR = "parts"
STATS_PREFIX = "hydra_fleet_part_"
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PART_FILE = re.compile(r"^job-([A-Za-z0-9_-]{1,64})\.json$")


class PartError(ValueError):
    """A part (file or artifact) that cannot be used."""


def clean_id(value: Any, what: str) -> str:
    """An AWX id as the text used in paths and keys; PartError when it is not a plain id."""
    text = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    if not _ID.match(text):
        raise PartError("%s %r is not an AWX id (letters, digits, '-' or '_')" % (what, value))
    return text


def part_path(report_dir: str, workflow_id: str, job_id: str) -> str:
    return os.path.join(report_dir, PARTS_DIR, workflow_id, "job-%s.json" % job_id)


def stats_key(job_id: str) -> str:
    return STATS_PREFIX + job_id


def build_part(hosts: Mapping[str, Mapping[str, Any]], inventory_hosts: Iterable[str], groups: Mapping[str, list[str]],
               workflow_id: str, job_id: str, generated_at: Optional[str], playbook: Optional[str]) -> dict[str, Any]:
    """A slice's part: every host entry as the collector holds it, and the hosts the slice was given."""
    return {
        "kind": PART_KIND, "schema_version": PART_SCHEMA_VERSION, "workflow_job_id": workflow_id, "job_id": job_id,
        "generated_at": generated_at, "playbook": playbook, "inventory_hosts": sorted(set(inventory_hosts)),
        "hosts": dict((name, dict(hosts[name])) for name in sorted(hosts)), "groups": dict(groups),
    }


def part_summary(summary: Mapping[str, Any], statuses: Mapping[str, str], workflow_id: str, job_id: str) -> dict[str, Any]:
    """The slice's set_stats data under its own key: the hydra_fleet summary plus each host's status (no details)."""
    data = dict(summary, workflow_job_id=workflow_id, job_id=job_id, host_statuses=dict(sorted(statuses.items())))
    return {stats_key(job_id): data}


def list_part_files(report_dir: str, workflow_id: str) -> list[tuple[str, str]]:
    """(path, text or '' when unreadable) of each job-*.json under parts/<workflow id>/, in name order."""
    directory = os.path.join(report_dir, PARTS_DIR, workflow_id)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    out = []
    for name in names:
        if not _PART_FILE.match(name):
            continue
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as handle:
                out.append((path, handle.read()))
        except (OSError, UnicodeDecodeError):
            out.append((path, ""))
    return out


def parse_part(text: str) -> dict[str, Any]:
    """A part file's content, checked; PartError says what is wrong."""
    try:
        part = json.loads(text)
    except ValueError as exc:
        raise PartError("not JSON (%s)" % " ".join(str(exc).split())) from exc
    if not isinstance(part, dict) or part.get("kind") != PART_KIND:
        raise PartError("not a fleet part (its kind is not %s)" % PART_KIND)
    hosts, inventory = part.get("hosts"), part.get("inventory_hosts")
    if not isinstance(hosts, dict) or not isinstance(inventory, list):
        raise PartError("no 'hosts' mapping or 'inventory_hosts' list")
    for name, entry in hosts.items():
        if not isinstance(entry, dict) or entry.get("status") not in ALL_HOST_STATUSES:
            raise PartError("host %r has no valid status" % name)
    part["workflow_job_id"] = clean_id(part.get("workflow_job_id"), "workflow_job_id")
    part["job_id"] = clean_id(part.get("job_id"), "job_id")
    if not isinstance(part.get("groups"), dict):
        part["groups"] = {}
    return part


def _summary_entry(status: str, key: str) -> dict[str, Any]:
    return {"status": status, "message": "only the summary (AWX artifact %s) reached the merge: no check details" % key,
            "failing_checks": [], "warning_checks": [], "roots": [], "doctor": None, "profile": None, "env_setup": None,
            "class": None}


def _missing_entry(message: str) -> dict[str, Any]:
    entry = _summary_entry(MISSING, "")
    entry["message"] = message
    return entry


def merge(files: Iterable[tuple[str, str]], stats: Mapping[str, Any], workflow_id: str, inventory_hosts: Iterable[str],
          problems: list[str]) -> dict[str, Any]:
    """Merge the parts of one workflow: {hosts, groups, merge}. A corrupt part is a line in problems, not fatal.

    files: (name, text) of part files; stats: hydra_fleet_part_<job> artifacts (extra vars). A part of another
    workflow is ignored (listed in merge.ignored). A job with both uses its file (full details). Every host of
    inventory_hosts in no part is MISSING, never healthy.
    """
    parts: dict[str, dict[str, Any]] = {}
    ignored: list[str] = []
    for name, text in files:
        try:
            part = parse_part(text)
        except PartError as exc:
            problems.append("parts: %s is corrupt, ignored: %s" % (name, exc))
            continue
        if part["workflow_job_id"] != workflow_id:
            ignored.append(name)
            continue
        parts[part["job_id"]] = dict(part, source=name)
    from_stats = []
    for key in sorted(stats):
        value = stats[key]
        try:
            if not key.startswith(STATS_PREFIX) or not isinstance(value, Mapping):
                raise PartError("not a slice summary")
            job_id = clean_id(value.get("job_id"), "job_id")
            if clean_id(value.get("workflow_job_id"), "workflow_job_id") != workflow_id:
                ignored.append(key)
                continue
            statuses = value.get("host_statuses")
            if not isinstance(statuses, Mapping) or any(s not in ALL_HOST_STATUSES for s in statuses.values()):
                raise PartError("no valid host_statuses")
        except PartError as exc:
            problems.append("parts: %s is corrupt, ignored: %s" % (key, exc))
            continue
        if job_id in parts:
            continue  # the file has everything the summary has, and the details
        from_stats.append(key)
        parts[job_id] = {"job_id": job_id, "source": key, "groups": {}, "inventory_hosts": sorted(statuses),
                         "hosts": dict((h, _summary_entry(s, key)) for h, s in statuses.items())}
    hosts: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[str]] = {}
    given: dict[str, str] = {}
    for job_id in sorted(parts):
        part = parts[job_id]
        hosts.update(part["hosts"])
        groups.update(part["groups"])
        for name in part["inventory_hosts"]:
            given.setdefault(name, job_id)
    missing = 0
    for name in sorted(set(inventory_hosts) | set(given)):
        if name in hosts:
            continue
        missing += 1
        if name in given:
            hosts[name] = _missing_entry("in the slice of job %s, which reported no result for it" % given[name])
        else:
            hosts[name] = _missing_entry("in no slice's part: its slice failed, was canceled or wrote no part")
    return {"hosts": dict((name, hosts[name]) for name in sorted(hosts)), "groups": groups,
            "merge": {"workflow_job_id": workflow_id, "jobs": sorted(parts), "from_stats": from_stats,
                      "ignored": sorted(ignored), "missing": missing}}

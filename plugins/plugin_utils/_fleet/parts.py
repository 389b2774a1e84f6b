# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Sliced runs (AWX job slicing): one part per slice, merged into one fleet report (no I/O but read_part_files).

A slice of an AWX workflow carries ``awx_workflow_job_id`` (shared by the slices) and its own ``awx_job_id``; the
fleet_report callback then writes ``<report_dir>/parts/<workflow id>/job-<job id>.json`` (build_part) instead of the
shared report, and doctor.yml publishes part_summary as the job's artifact: each host's status, and each failing or
warning host's check ids (host_checks, bounded per host), so that a merge without the part files (AWX deletes every
job's private data dir) still says what failed where. playbooks/merge.yml merges both kinds (merge): every host of the
full inventory found in no part is MISSING. See docs/awx.md.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._status import ALL_HOST_STATUSES, ERROR, FAIL, MISSING, PROBLEMS, WARN, host_verdict, severity
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import judged

PART_KIND = "continuum.hydra.fleet_part"
PART_SCHEMA_VERSION = "1.0.0"
MERGED_KIND = "continuum.hydra.fleet_merged"
MERGED_FILE = "merged.jsonl"  # not a job-*.json: never read as a part
PARTS_DIR = "parts"
STATS_PREFIX = "hydra_fleet_part_"
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PART_FILE = re.compile(r"^job-([A-Za-z0-9_-]{1,64})\.json$")
# A check id as the fleet report's schema has it (dotted, lower case): what an artifact's host_checks may name.
_CHECK_ID = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")

# An artifact's host_checks, per failing or warning host: {"FAIL": [ids], "ERROR": [ids], "WARN": [ids], "more": n},
# worst status first, ids in name order within one, a status without ids left out; at most HOST_CHECKS_MAX ids in
# all, "more" counts the rest. AWX keeps every artifact in its database and copies it into every later workflow
# node's extra vars: the bound keeps a slice's artifact to a few hundred bytes a host (docs/awx.md).
HOST_CHECKS = "host_checks"
HOST_CHECKS_MAX = 8
MORE = "more"


class PartError(ValueError):
    """A part (file or artifact) that cannot be used."""


def clean_id(value: Any, what: str) -> str:
    """An AWX id as the text used in paths and keys; PartError when it is not a plain id."""
    text = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    if not _ID.match(text):
        raise PartError("%s %r is not an AWX id (letters, digits, '-' or '_')" % (what, value))
    return text


def merged_path(report_dir: str, workflow_id: str) -> str:
    """Where the fleet_merge action leaves the merged hosts for the fleet_report callback (merged_text), which reads and
    removes it: a merge of many hosts carried in the task's result cost Ansible ~27 ms and ~220 KB a host
    (benchmarks/fleet_merge.py); the result carries the path."""
    return os.path.join(report_dir, PARTS_DIR, workflow_id, MERGED_FILE)


def merged_text(merged: Mapping[str, Any]) -> Iterator[str]:
    """merge()'s result as JSON lines: {"kind", "merge", "groups", "hosts": how many}, then [name, entry] per host, so
    that its reader holds one host's text at a time (parse_merged)."""
    header = {"kind": MERGED_KIND, "merge": merged["merge"], "groups": merged["groups"], "hosts": len(merged["hosts"])}
    yield json.dumps(header, separators=(",", ":")) + "\n"
    for name, entry in merged["hosts"].items():
        yield json.dumps([name, entry], separators=(",", ":")) + "\n"


def _json_line(line: str, where: str) -> Any:
    try:
        return json.loads(line)
    except ValueError as exc:
        raise PartError("%s is not JSON (%s)" % (where, " ".join(str(exc).split()))) from exc


def parse_merged(lines: Iterable[str]) -> dict[str, Any]:
    """The hosts and groups of merged_text()'s lines, checked one at a time; PartError says what is wrong (a file cut
    short included). The merge's own record comes to the callback in the task's result, not from here."""
    lines = iter(lines)
    header = _json_line(next(lines, ""), "line 1")
    if not isinstance(header, dict) or header.get("kind") != MERGED_KIND or not isinstance(header.get("hosts"), int):
        raise PartError("not the merged hosts of fleet_merge (its kind is not %s)" % MERGED_KIND)
    hosts: dict[str, Any] = {}
    for number, line in enumerate(lines, 2):
        pair = _json_line(line, "line %d" % number)
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and isinstance(pair[1], dict)):
            raise PartError("line %d is not [host, entry]" % number)
        if pair[1].get("status") not in ALL_HOST_STATUSES:
            raise PartError("host %r has no valid status" % pair[0])
        if pair[0] in hosts:
            raise PartError("host %r is on two lines" % pair[0])
        hosts[pair[0]] = pair[1]
    if len(hosts) != header["hosts"]:
        raise PartError("%d hosts where its first line says %d%s" % (
            len(hosts), header["hosts"], ": the file ends early" if len(hosts) < header["hosts"] else ""))
    return {"hosts": hosts, "groups": header["groups"] if isinstance(header.get("groups"), dict) else {}}


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


def host_checks(checks: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """A host's FAIL, ERROR and WARN check ids as an artifact carries them (HOST_CHECKS_MAX, "more"); None: none.

    The statuses the host's verdict counts (report.judged): a check blocked by a failed root is not one of them,
    its root is."""
    problems = sorted(((chk["status"], chk["id"]) for chk in judged(checks) if chk.get("status") in PROBLEMS),
                      key=lambda status_id: (-severity(status_id[0]), status_id[1]))
    if not problems:
        return None
    carried: dict[str, Any] = {}
    for status, check_id in problems[:HOST_CHECKS_MAX]:
        carried.setdefault(status, []).append(check_id)
    carried[MORE] = max(0, len(problems) - HOST_CHECKS_MAX)
    return carried


def part_summary(summary: Mapping[str, Any], hosts: Mapping[str, Mapping[str, Any]], workflow_id: str, job_id: str) -> dict[str, Any]:
    """The slice's set_stats data under its own key: the hydra_fleet summary, each host's status, and the check ids
    of each failing or warning host (host_checks); hosts are the collector's entries."""
    statuses = dict((name, hosts[name]["status"]) for name in sorted(hosts))
    carried = {}
    for name in sorted(hosts):
        checks = (hosts[name].get("doctor") or {}).get("checks")
        ids = host_checks(checks) if isinstance(checks, list) else None
        if ids:
            carried[name] = ids
    data = dict(summary, workflow_job_id=workflow_id, job_id=job_id, host_statuses=statuses)
    data[HOST_CHECKS] = carried
    return {stats_key(job_id): data}


def _carried_checks(value: Any, statuses: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """An artifact's host_checks, checked ({} when the slice published none); PartError says what is wrong."""
    if value is None:
        return {}  # an artifact of a collection version that carried only the statuses
    if not isinstance(value, Mapping):
        raise PartError("host_checks is not a mapping of hosts")
    for name, carried in value.items():
        if name not in statuses:
            raise PartError("host_checks names %r, which is not in its host_statuses" % (name,))
        if not isinstance(carried, Mapping) or not set(carried) <= set(PROBLEMS + (MORE,)):
            raise PartError("host_checks of %r is not {FAIL|ERROR|WARN: [check ids], more: count}" % (name,))
        lists = [carried.get(status, []) for status in PROBLEMS]
        if not all(isinstance(ids, list) and all(isinstance(i, str) and _CHECK_ID.match(i) for i in ids) for ids in lists):
            raise PartError("host_checks of %r: FAIL, ERROR and WARN must be lists of dotted check ids" % (name,))
        more = carried.get(MORE, 0)
        if not isinstance(more, int) or isinstance(more, bool) or more < 0:
            raise PartError("host_checks of %r: more is %r, not a count" % (name, more))
        # The worst status is always carried (worst first), so the ids must give the host the status it is listed with.
        verdict = host_verdict(dict((status, len(ids)) for status, ids in zip(PROBLEMS, lists)))
        if verdict != statuses[name]:
            raise PartError("host_checks of %r make it %s, but its host_statuses say %s" % (name, verdict, statuses[name]))
    return dict((name, dict(carried)) for name, carried in value.items())


def read_part_files(report_dir: str, workflow_id: str) -> Iterator[tuple[str, str]]:
    """(path, text or '' when unreadable) of each job-*.json under parts/<workflow id>/, in name order, each read
    when the caller comes to it: merge() holds one part's text at a time (a part of 1,000 hosts is ~150 MB)."""
    directory = os.path.join(report_dir, PARTS_DIR, workflow_id)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return
    for name in names:
        if not _PART_FILE.match(name):
            continue
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError):
            text = ""
        yield path, text


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


def _summary_entry(status: str, key: str, carried: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """A host known from an artifact alone: its status, and the check ids the artifact carried (artifact_checks, which
    the report's failing checks and actions count), without messages, GPUs or remediations."""
    entry: dict[str, Any] = {
        "status": status, "message": "only the summary (AWX artifact %s) reached the merge: no check details" % key,
        "failing_checks": [], "warning_checks": [], "roots": [], "doctor": None, "profile": None, "env_setup": None,
        "class": None}
    if not carried:
        return entry
    note = "no details: only the AWX artifact %s reached the merge" % key
    entry["artifact_checks"] = [{"id": check_id, "status": status, "message": note}
                                for status in PROBLEMS for check_id in carried.get(status) or []]
    entry["failing_checks"] = [c["id"] for c in entry["artifact_checks"] if c["status"] in (FAIL, ERROR)]
    entry["warning_checks"] = [c["id"] for c in entry["artifact_checks"] if c["status"] == WARN]
    more = carried.get(MORE) or 0
    entry["message"] = "only the summary (AWX artifact %s) reached the merge: check ids, no details%s" % (
        key, "; %d more failing or warning check%s not carried" % (more, "" if more == 1 else "s") if more else "")
    return entry


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
        try:
            carried = _carried_checks(value.get(HOST_CHECKS), statuses)
        except PartError as exc:
            problems.append("parts: %s: its check ids are ignored, its host statuses used: %s" % (key, exc))
            carried = {}
        from_stats.append(key)
        parts[job_id] = {"job_id": job_id, "source": key, "groups": {}, "inventory_hosts": sorted(statuses),
                         "hosts": dict((h, _summary_entry(s, key, carried.get(h))) for h, s in statuses.items())}
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

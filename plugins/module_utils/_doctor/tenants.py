# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Tenant SLOs: metric files, the per-tenant state machine, bully ranking and the tier-1/tier-2 mitigation plan.

Shared by doctor's check ``tenant.slo`` (checks/tenant.py) and the tenant_guard role's node program, so both judge
a tenant the same way and keep one state file (``<state_dir>/tenants.json``, docs/tenant-slos.md).

A tenant writes its p99 latency to ``<metrics_dir>/<PID>.metric``: ``p99_latency_ms: 87.5`` or a bare ``87.5``.
It is keyed by ``<PID>:<starttime>`` (/proc/<pid>/stat field 22), so a reused PID is a new tenant.

The state machine, one step per observation (a doctor run or a guard tick)::

    NORMAL    -- over the SLO -->                  DEGRADED (WARN), or VIOLATED at once when persistence_runs is 1
    DEGRADED  -- over, persistence_runs in a row -> VIOLATED (FAIL); under -> NORMAL
    VIOLATED  -- over -> VIOLATED (FAIL); under -> COOLDOWN (cooldown_runs runs; 0: NORMAL at once)
    COOLDOWN  -- any  -> COOLDOWN until cooldown_runs observations have passed, then NORMAL (not judged meanwhile)

Mitigation: tier 1 moves the bully (the co-located process with the highest storage I/O rate, then GPU memory)
into its own cgroup with an io.max / blkio.throttle limit of ``rate / (p99 / slo)`` bytes/s, between
``tenant_io_limit_min_bps`` and ``tenant_io_limit_max_bps``. Tier 2 (MIG) is named once tier 1 was applied and
the tenant is still over ``persistence_runs`` observations later, or when the bully does no I/O but uses a GPU.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import state as doctor_state

NORMAL = "NORMAL"
DEGRADED = "DEGRADED"
VIOLATED = "VIOLATED"
COOLDOWN = "COOLDOWN"
STATES = (NORMAL, DEGRADED, VIOLATED, COOLDOWN)

STATE_FILE = "tenants.json"
STATE_SCHEMA = 1
DEFAULT_STATE_DIR = doctor_state.DEFAULT_STATE_DIR  # doctor's state_dir default (state.py), shared with the health check
METRIC_SUFFIX = ".metric"
METRIC_MAX_BYTES = 4096
# cgroup_limits parent and group name of a bully hydra moved (tier 1).
BULLY_GROUP = "tenant-bully-%d"
BULLY_PARENT = "hydra.slice"

_KEYED = re.compile(r"^\s*p99_latency_ms\s*[:=]\s*(\S+)\s*$")


class MetricError(ValueError):
    """A metric file that is not one of the two formats: the message says what was found."""


def parse_metric(text: str) -> float:
    """``p99_latency_ms: 87.5`` (a line of the file; other lines are ignored) or the bare number as the whole file."""
    if "\0" in text:
        raise MetricError("binary content")
    lines = [line for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    keyed = [match.group(1) for match in (_KEYED.match(line) for line in lines) if match]
    if keyed:
        raw = keyed[-1]
    elif len(lines) == 1:
        raw = lines[0].strip()
    else:
        raise MetricError("no 'p99_latency_ms: <ms>' line and not a bare number (%r)" % text[:60])
    try:
        value = float(raw)
    except ValueError:
        raise MetricError("%r is not a number of milliseconds" % raw[:40]) from None
    if not math.isfinite(value) or value < 0:
        raise MetricError("%r is not a non-negative finite number of milliseconds" % raw[:40])
    return value


def metric_pid(name: str) -> Optional[int]:
    """The PID a metric file is named by (``1234.metric``), None for any other name."""
    stem = name[:-len(METRIC_SUFFIX)] if name.endswith(METRIC_SUFFIX) else ""
    return int(stem) if stem.isdigit() and int(stem) > 0 else None


def tenant_key(pid: int, starttime: Optional[int]) -> str:
    return "%d:%s" % (pid, "?" if starttime is None else starttime)


def new_record() -> dict[str, Any]:
    return {"state": NORMAL, "over_runs": 0, "violated_runs": 0, "cooldown_left": 0, "tier1": None}


def step(previous: Optional[Mapping[str, Any]], over: bool, persistence_runs: int, cooldown_runs: int) -> dict[str, Any]:
    """One observation: the tenant's record before (None: first seen) and whether its p99 is over the SLO ->
    the record after. Pure; the keys not part of the machine (tier1, identity) are carried over."""
    record = dict(new_record(), **dict(previous or {}))
    state = record["state"] if record["state"] in STATES else NORMAL
    persistence_runs = max(1, int(persistence_runs))
    if state == COOLDOWN:
        left = int(record.get("cooldown_left") or 0) - 1
        record.update(state=COOLDOWN if left > 0 else NORMAL, cooldown_left=max(0, left), over_runs=0, violated_runs=0)
        return record
    if state == VIOLATED:
        if over:
            record.update(violated_runs=int(record.get("violated_runs") or 0) + 1, over_runs=int(record.get("over_runs") or 0) + 1)
        else:
            record.update(state=COOLDOWN if cooldown_runs > 0 else NORMAL, cooldown_left=max(0, int(cooldown_runs)),
                          over_runs=0, violated_runs=0)
        return record
    if not over:
        record.update(state=NORMAL, over_runs=0, violated_runs=0)
        return record
    runs = int(record.get("over_runs") or 0) + 1
    if runs >= persistence_runs:
        record.update(state=VIOLATED, over_runs=runs, violated_runs=1)
    else:
        record.update(state=DEGRADED, over_runs=runs, violated_runs=0)
    return record


def io_rates(first: Mapping[int, Mapping[str, int]], second: Mapping[int, Mapping[str, int]], seconds: float) -> dict[int, dict[str, float]]:
    """Two /proc/<pid>/io samples ``seconds`` apart -> {pid: {read_bps, write_bps, io_bps}} (storage bytes: read_bytes,
    write_bytes). A process in only one sample is left out; a counter that went back (PID reused) counts 0."""
    out = {}
    seconds = max(seconds, 1e-6)
    for pid, after in second.items():
        before = first.get(pid)
        if before is None:
            continue
        read = max(0, after.get("read_bytes", 0) - before.get("read_bytes", 0)) / seconds
        write = max(0, after.get("write_bytes", 0) - before.get("write_bytes", 0)) / seconds
        out[pid] = {"read_bps": round(read, 1), "write_bps": round(write, 1), "io_bps": round(read + write, 1)}
    return out


def rank_bullies(processes: Sequence[Mapping[str, Any]], exclude: Sequence[int], limit: int = 5) -> list[dict[str, Any]]:
    """Co-located processes that do storage I/O or hold GPU memory, worst first: by I/O rate, then GPU memory.

    processes: [{pid, comm, cmdline, cgroup, io_bps, read_bps, write_bps, gpu_memory_mib}]; ``exclude``: the tenant.
    """
    skip = set(exclude)
    found = [dict(p) for p in processes if p.get("pid") not in skip
             and ((p.get("io_bps") or 0) > 0 or (p.get("gpu_memory_mib") or 0) > 0)]
    found.sort(key=lambda p: (-(p.get("io_bps") or 0), -(p.get("gpu_memory_mib") or 0), p.get("pid") or 0))
    return found[:limit]


def io_limit(rate_bps: float, ratio: float, min_bps: int, max_bps: int) -> int:
    """Tier 1's limit: the bully's rate scaled down by how far over the SLO the tenant is, within [min, max]."""
    scaled = rate_bps / max(ratio, 1.0)
    return int(max(min_bps, min(max_bps, scaled)))


def tier1_entry(bully: Mapping[str, Any], ratio: float, devices: Sequence[str], min_bps: int, max_bps: int,
                limit: Optional[int] = None) -> dict[str, Any]:
    """A cgroup_limits ``limits`` entry moving the bully into its own group with read and write bytes/s limits
    (``limit`` when given: the one already applied, which the bully's throttled rate must not scale down again)."""
    limit = limit or io_limit(float(bully.get("io_bps") or 0), ratio, min_bps, max_bps)
    return {"name": BULLY_GROUP % int(bully["pid"]), "pids": [int(bully["pid"])],
            "io_max": [{"device": device, "rbps": limit, "wbps": limit} for device in devices]}


def mitigation(record: Mapping[str, Any], bully: Optional[Mapping[str, Any]], ratio: float, devices: Sequence[str],
               min_bps: int, max_bps: int, persistence_runs: int, gpus: Sequence[str]) -> dict[str, Any]:
    """What to do for a VIOLATED tenant: {tier: 1|2|None, cgroup_limits: [entry] or [], mig_gpus: [...], why}."""
    out: dict[str, Any] = {"tier": None, "cgroup_limits": [], "mig_gpus": list(gpus), "why": ""}
    if bully is None:
        out["why"] = "no co-located process does storage I/O or holds GPU memory: nothing to limit"
        return out
    tier1 = record.get("tier1")
    if tier1 and int(record.get("violated_runs") or 0) - int(tier1.get("violated_runs") or 0) >= max(1, persistence_runs):
        out.update(tier=2, why="tier 1 (io limit on PID %s) applied %d observation(s) ago and the tenant is still over: "
                   "isolate with MIG" % (tier1.get("pid"), int(record.get("violated_runs") or 0) - int(tier1.get("violated_runs") or 0)))
        return out
    applied = tier1.get("limit_bps") if tier1 and tier1.get("pid") == bully.get("pid") else None
    if ((bully.get("io_bps") or 0) <= 0 and not applied) or not devices:
        out.update(tier=2, why="the bully (PID %s) does no storage I/O to limit%s: isolate with MIG" % (
            bully.get("pid"), "" if devices else " (no block device to limit)"))
        return out
    entry = tier1_entry(bully, ratio, devices, min_bps, max_bps, applied)
    out.update(tier=1, cgroup_limits=[entry], why="limit PID %s (%s) to %d B/s read and write on %s" % (
        bully.get("pid"), bully.get("comm"), entry["io_max"][0]["rbps"], ", ".join(devices)))
    return out


def state_document(records: Mapping[str, Mapping[str, Any]], runs: int, at: str) -> dict[str, Any]:
    """The state file's content (docs/tenant-slos.md): {schema, runs, updated_at, tenants: {key: record}}."""
    return {"schema": STATE_SCHEMA, "runs": runs, "updated_at": at, "tenants": {k: dict(v) for k, v in sorted(records.items())}}


def read_document(data: Any) -> tuple[dict[str, Any], Optional[str]]:
    """A loaded state file -> (its tenants and runs as a document, a problem or None). A bad file starts afresh."""
    if data is None:
        return state_document({}, 0, ""), None
    if not isinstance(data, dict) or data.get("schema") != STATE_SCHEMA or not isinstance(data.get("tenants"), dict):
        return state_document({}, 0, ""), "not a schema %d tenant state file: starting afresh" % STATE_SCHEMA
    tenants = {k: v for k, v in data["tenants"].items() if isinstance(v, dict)}
    runs = data["runs"] if isinstance(data.get("runs"), int) else 0
    return state_document(tenants, runs, str(data.get("updated_at") or "")), None

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Tenant SLOs on shared GPU nodes: check tenant.slo (state machine and mitigation in _doctor/tenants.py).

The check is pure: the probe hands it the previous state, it returns the next one in ``details.persist``
({path, document}) and doctor's run writes that file after evaluation (run.persist_states).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import tenants
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, PASS, SKIP, WARN

SLO = _expect.key("tenant_slo_p99_ms")
PERSISTENCE = _expect.key("tenant_persistence_runs")
COOLDOWN = _expect.key("tenant_cooldown_runs")
LIMIT_MAX = _expect.key("tenant_io_limit_max_bps")
LIMIT_MIN = _expect.key("tenant_io_limit_min_bps")


@check("tenant.slo", "tenants' p99 latency SLO and their noisy neighbours", requires=("tenants",), uses=("nvidia_smi",))
def tenant_slo(probes: Probes, expect: Expect) -> Finding:
    """Reads `<tenant_metrics_dir>/<PID>.metric` (p99 ms), /proc/<pid>/io, nvidia-smi's compute apps and `<state_dir>/tenants.json`.

    Per tenant (PID and start time) a state machine: over `tenant_slo_p99_ms` is DEGRADED (WARN); over for
    `tenant_persistence_runs` runs in a row is VIOLATED (FAIL), naming the tenant (PID, command, cgroup) and the
    likely bully (co-located processes by storage I/O rate, then GPU memory); back under it is COOLDOWN for
    `tenant_cooldown_runs` runs, then NORMAL. Unreadable or garbage metric files are WARN (listed); files of exited
    PIDs are listed as stale. SKIP without `tenant_slo_p99_ms` or without the metrics directory.
    Remediation: tier 1 limits the bully's I/O with cgroup_limits (io.max / blkio throttle, scaled by how far over the
    SLO the tenant is, capped by `tenant_io_limit_max_bps`); tier 2 isolates with MIG when tier 1 did not help.
    """
    data = probes["tenants"]["data"]
    slo = _expect.get(expect, SLO)
    if slo is None or slo <= 0:
        return finding(SKIP, "no p99 SLO to judge %d tenant(s) against: set hydra_expect.%s (ms)" % (len(data["tenants"]), SLO),
                       {"stale": data["stale"], "garbage": data["garbage"]})
    persistence, cooldown = int(_expect.get(expect, PERSISTENCE)), int(_expect.get(expect, COOLDOWN))
    previous, problem = tenants.read_document(data.get("previous"))
    problems = [p for p in (data.get("state_problem"), problem) if p]
    gpu_index = _gpu_indexes(probes.get("nvidia_smi"))
    records: dict[str, dict[str, Any]] = {}
    judged = []
    for tenant in data["tenants"]:
        over = tenant["p99_ms"] > slo
        record = tenants.step(previous["tenants"].get(tenant["key"]), over, persistence, cooldown)
        record.update(pid=tenant["pid"], comm=tenant.get("comm"), cgroup=tenant.get("cgroup"), last_p99_ms=tenant["p99_ms"])
        records[tenant["key"]] = record
        view = {"key": tenant["key"], "pid": tenant["pid"], "comm": tenant.get("comm"), "cmdline": tenant.get("cmdline"),
                "cgroup": tenant.get("cgroup"), "file": tenant["file"], "p99_ms": tenant["p99_ms"], "slo_p99_ms": slo,
                "over": over, "state": record["state"], "over_runs": record["over_runs"], "violated_runs": record["violated_runs"],
                "cooldown_left": record["cooldown_left"],
                "tier1": record.get("tier1")}
        if record["state"] == tenants.VIOLATED:
            bullies = tenants.rank_bullies(data["processes"], [tenant["pid"]])
            gpus = sorted(set(gpu_index[u] for p in [tenant] + bullies[:1] for u in _uuids(data, p["pid"]) if u in gpu_index))
            view["bullies"] = bullies
            view["mitigation"] = tenants.mitigation(record, bullies[0] if bullies else None, tenant["p99_ms"] / slo,
                                                    data["devices"], int(_expect.get(expect, LIMIT_MIN)),
                                                    int(_expect.get(expect, LIMIT_MAX)), persistence, gpus)
        judged.append(view)
    at = datetime.datetime.fromtimestamp(data["now"], datetime.timezone.utc).isoformat()
    document = tenants.state_document(records, previous["runs"] + 1, at)
    details = {"tenants": judged, "stale": data["stale"], "garbage": data["garbage"], "metrics_dir": data["metrics_dir"],
               "slo_p99_ms": slo, "persistence_runs": persistence, "cooldown_runs": cooldown, "io_sample_s": data["io_sample_s"],
               "gpu_source": data.get("gpu_source"), "gpu_reason": data.get("gpu_reason"), "devices": data["devices"],
               "state_problems": problems, "persist": {"path": data["state_path"], "document": document}}
    violated = [t for t in judged if t["state"] == tenants.VIOLATED]
    degraded = [t for t in judged if t["state"] == tenants.DEGRADED]
    if violated:
        return finding(FAIL, "; ".join(_violation(t) for t in violated), details, remediation=_remediation(violated))
    notes = []
    if degraded:
        notes.append("; ".join("tenant PID %d (%s) over its p99 SLO: %g ms > %g ms (%d of %d runs before VIOLATED)" % (
            t["pid"], t["comm"], t["p99_ms"], slo, t["over_runs"], persistence) for t in degraded))
    if data["garbage"]:
        notes.append("%d metric file(s) unreadable or not a metric (%s)" % (
            len(data["garbage"]), ", ".join("%s: %s" % (g["file"], g["reason"]) for g in data["garbage"][:3])))
    if problems:
        notes.append("state: %s" % "; ".join(problems))
    if notes:
        return finding(WARN, "; ".join(notes), details,
                       remediation="watch the tenant: it turns VIOLATED after %d runs over; fix or remove the bad metric files"
                       % persistence)
    counts = dict((s, sum(1 for t in judged if t["state"] == s)) for s in tenants.STATES)
    return finding(PASS, "%d tenant(s) within their p99 SLO of %g ms (%s)%s" % (
        len(judged), slo, ", ".join("%d %s" % (n, s) for s, n in counts.items() if n) or "none live",
        "; %d stale metric file(s)" % len(data["stale"]) if data["stale"] else ""), details)


def _uuids(data: Mapping[str, Any], pid: int) -> list[str]:
    for proc in data["processes"]:
        if proc["pid"] == pid:
            return list(proc.get("gpu_uuids") or [])
    return []


def _gpu_indexes(envelope: Optional[Mapping[str, Any]]) -> dict[str, str]:
    gpus = ((envelope or {}).get("data") or {}).get("gpus") or []
    return dict((g["uuid"], str(g["index"])) for g in gpus if g.get("uuid") and g.get("index") is not None)


def _rate(bps: Any) -> str:
    return "%.1f MB/s" % (bps / 1e6) if bps else "no I/O"


def _violation(tenant: Mapping[str, Any]) -> str:
    bullies = tenant.get("bullies") or []
    if bullies:
        top = bullies[0]
        blame = "likely bully PID %d (%s, cgroup %s, %s%s)" % (
            top["pid"], top.get("comm"), top.get("cgroup"), _rate(top.get("io_bps")),
            ", %d MiB GPU memory" % top["gpu_memory_mib"] if top.get("gpu_memory_mib") else "")
        if len(bullies) > 1:
            blame += "; then %s" % ", ".join("PID %d (%s, %s)" % (b["pid"], b.get("comm"), _rate(b.get("io_bps"))) for b in bullies[1:3])
    else:
        blame = "no co-located process does I/O or uses a GPU"
    return "tenant PID %d (%s, cgroup %s) VIOLATED its p99 SLO: %g ms > %g ms for %d runs; %s" % (
        tenant["pid"], tenant.get("comm"), tenant.get("cgroup"), tenant["p99_ms"], tenant["slo_p99_ms"], tenant["over_runs"], blame)


def _remediation(violated: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for tenant in violated:
        plan = tenant.get("mitigation") or {}
        if plan.get("tier") == 1:
            parts.append("tier 1: cgroup_limits, %s; tier 2 (mig role) if the tenant is still over %s" % (
                plan["why"], "after the persistence window"))
        elif plan.get("tier") == 2:
            parts.append("tier 2: mig role on GPU(s) %s (%s)" % (", ".join(plan.get("mig_gpus") or []) or "shared by them",
                                                                 plan["why"]))
        else:
            parts.append("PID %d: %s" % (tenant["pid"], plan.get("why") or "find the co-located load by hand"))
    return "; ".join(parts) + " (the remediation_plan filter and the tenant_guard role apply these)"

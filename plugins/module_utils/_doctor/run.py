# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""doctor's run: select checks, run the probes they need once, judge, assemble the result.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _atomic, _expect, _results
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import levels
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE, PROBE_ROOTS
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import active as active_probe
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue as probe_catalogue
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import dcgm as dcgm_probe
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import rvs as rvs_probe
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import DEFAULT_COMMAND_TIMEOUT
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import nvidia_smi, rocm_version
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, PASS, WARN, host_verdict

HYDRA_VERSION = "0.2.0"

# timeouts.total: the whole run's deadline. Well under the time an Ansible run is usually given for a task
# (AWX/CI job limits, async windows, an operator's patience with one step of a fleet play): a host that hangs
# must still return a result, with its unfinished checks ERROR, so the fleet report is written.
DEFAULT_TOTAL_TIMEOUT = 300

DEFAULT_TIMEOUTS = {"nvidia_smi": nvidia_smi.DEFAULT_TIMEOUT, "kernel_log": 15, "torch": 90, "command": DEFAULT_COMMAND_TIMEOUT,
                    "total": DEFAULT_TOTAL_TIMEOUT,
                    # level deep: dcgmi diag's default follows its -r level (probes/dcgm.DIAG_TIMEOUTS), here for -r 2.
                    "dcgm_diag": dcgm_probe.DIAG_TIMEOUTS[dcgm_probe.DEFAULT_DIAG_LEVEL], "rvs": rvs_probe.DEFAULT_TIMEOUT,
                    "active": active_probe.ACTIVE_TIMEOUT_S}
# The per-probe timeouts of level deep's active tools: unless timeouts.total is given, a deep run's deadline is
# DEFAULT_TOTAL_TIMEOUT plus these (each tool may use its whole timeout and the passive probes still fit).
DEEP_TIMEOUTS = ("dcgm_diag", "rvs", "active")

# Host facts in every result need these two, whatever checks are selected.
ALWAYS_PROBED = ("host", "nvidia_smi")


class DoctorInputError(ValueError):
    """Bad options: one line naming the bad value and what is accepted."""


def list_catalogue() -> list[dict[str, Any]]:
    return [chk.describe() for chk in CATALOGUE]


def validate(only: Optional[Sequence[str]], exclude: Optional[Sequence[str]], timeouts: Optional[Mapping[str, Any]],
             expect: Optional[Mapping[str, Any]] = None, level: str = levels.DEFAULT) -> None:
    if not levels.is_level(level):
        raise DoctorInputError("level: %r is not a level; accepted: %s" % (level, ", ".join(levels.LEVELS)))
    problems = _expect.problems(expect)
    if problems:
        raise DoctorInputError(problems[0])
    window = _expect.get(expect, "xid_window_hours")
    for code, rule in sorted((_expect.get(expect, "xid_policy") or {}).items(), key=lambda item: str(item[0])):
        if rule.get("window_hours") is not None and rule["window_hours"] > window:
            # The kernel log is read for xid_window_hours only: a longer window would count fewer events than it says.
            raise DoctorInputError("expect.xid_policy.%s.window_hours: %r is longer than xid_window_hours %r, the kernel log "
                                   "doctor reads; raise xid_window_hours" % (code, rule["window_hours"], window))
    for key, accepted in (("dcgm_diag_level", dcgm_probe.DIAG_LEVELS), ("rvs_level", rvs_probe.RVS_LEVELS)):
        value = _expect.get(expect, key)
        if value not in accepted:
            raise DoctorInputError("expect.%s: %r is not one of %s" % (key, value, ", ".join(str(n) for n in accepted)))
    for label, patterns in (("only", only), ("exclude", exclude)):
        if patterns is not None and (isinstance(patterns, str) or not all(isinstance(p, str) for p in patterns)):
            raise DoctorInputError("%s: %r is not a list of check ids or prefixes" % (label, patterns))
        unknown = registry.unknown_patterns(CATALOGUE, patterns)
        if unknown:
            raise DoctorInputError(
                "%s: %s matches no check id; ids start with one of: %s (list_checks=true shows them all)"
                % (label, ", ".join(repr(p) for p in unknown), ", ".join(sorted(set(c.category for c in CATALOGUE)))))
    above = registry.above_level(CATALOGUE, only, level)
    if above:
        # Naming a check the level leaves out is a contradiction: say so rather than run nothing of what was asked.
        raise DoctorInputError("only: %s selects only checks above level %s; run with level: %s (levels: %s)"
                               % (", ".join("%r (level %s)" % pair for pair in above), level,
                                  levels.highest(lvl for dummy, lvl in above), ", ".join(levels.LEVELS)))
    if not registry.select(CATALOGUE, only, exclude, level):
        # No check would run: the host's verdict would be "healthy" with nothing judged (a dead GPU included).
        raise DoctorInputError("only: %s, exclude: %s leave no check to run" % (list(only or []), list(exclude or [])))
    for name, value in (timeouts or {}).items():
        if name not in DEFAULT_TIMEOUTS:
            raise DoctorInputError("timeouts: unknown probe %r; accepted: %s" % (name, ", ".join(sorted(DEFAULT_TIMEOUTS))))
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
            raise DoctorInputError("timeouts.%s: %r is not a positive number of seconds" % (name, value))


def resolved_timeouts(timeouts: Optional[Mapping[str, Any]], expect: Mapping[str, Any], level: str = levels.DEFAULT) -> dict[str, Any]:
    """DEFAULT_TIMEOUTS with the given ones; dcgm_diag's default follows dcgm_diag_level, a deep run's total its tools."""
    given = dict(timeouts or {})
    out = dict(DEFAULT_TIMEOUTS)
    out["dcgm_diag"] = dcgm_probe.DIAG_TIMEOUTS.get(_expect.get(expect, "dcgm_diag_level"), out["dcgm_diag"])
    out.update(given)
    if level == levels.DEEP and "total" not in given:
        out["total"] = DEFAULT_TOTAL_TIMEOUT + sum(out[name] for name in DEEP_TIMEOUTS)
    return out


def deadline_s(timeouts: Optional[Mapping[str, Any]] = None, expect: Optional[Mapping[str, Any]] = None,
               level: Optional[str] = None) -> float:
    """The most a doctor run with these options takes: its ``timeouts.total`` (no probe starts past it, and each probe's
    timeout is cut to the time left). DoctorInputError, one line, for options the module would refuse."""
    level = level or levels.DEFAULT
    validate(None, None, timeouts, expect, level)
    return float(resolved_timeouts(timeouts, expect or {}, level)["total"])


def probe_options(expect: Mapping[str, Any], timeouts: Optional[Mapping[str, Any]] = None, nvidia_smi_path: Optional[str] = None,
                  torch_python: Optional[str] = None, level: str = levels.DEFAULT, state_dir: Optional[str] = None,
                  slurm_node: Optional[str] = None, force: bool = False) -> dict[str, Any]:
    """What the probes read: paths, timeouts, and the hydra_expect values that shape a probe, resolved here.

    Probes never read ``expect`` themselves. ``disk_paths`` stays None when the inventory names none: the probe
    then measures its default paths, which may be missing (a path the inventory names must exist).
    """
    return {
        "timeouts": resolved_timeouts(timeouts, expect, level),
        "level": level,
        "dcgm_diag_level": _expect.get(expect, "dcgm_diag_level"),
        "dcgm_host": _expect.get(expect, "dcgm_host"),
        "rvs_level": _expect.get(expect, "rvs_level"),
        "rvs_conf": _expect.get(expect, "rvs_conf"),
        "nvidia_smi_path": nvidia_smi_path,
        "torch_python": torch_python,
        "xid_window_hours": _expect.get(expect, "xid_window_hours"),
        # the windows of hydra_expect.xid_policy's rules: the kernel_log probe counts each Xid within each of them
        "xid_policy_windows": sorted(set(float(rule["window_hours"]) for rule in (_expect.get(expect, "xid_policy") or {}).values()
                                         if rule.get("window_hours") is not None)),
        "fabric_manager_log": _expect.get(expect, "fabric_manager_log"),
        "disk_paths": _expect.get(expect, "disk_paths") if _expect.given(expect, "disk_paths") else None,
        # tenant.slo (probes/tenant.py): where tenants write metrics, where the tenant state lives
        "state_dir": state_dir,
        "tenant_metrics_dir": _expect.get(expect, "tenant_metrics_dir"),
        "tenant_io_sample_s": _expect.get(expect, "tenant_io_sample_s"),
        "tenant_io_devices": _expect.get(expect, "tenant_io_devices"),
        # the idle guard (probes/idle.py): the node's SLURM name, and whether a busy node is loaded anyway
        "slurm_node": slurm_node,
        "force": force,
    }


def run(only: Optional[Sequence[str]] = None, exclude: Optional[Sequence[str]] = None, expect: Optional[Mapping[str, Any]] = None,
        timeouts: Optional[Mapping[str, Any]] = None, deterministic: bool = False, nvidia_smi_path: Optional[str] = None,
        torch_python: Optional[str] = None, probes: Optional[Mapping[str, Any]] = None, level: str = levels.DEFAULT,
        state_dir: Optional[str] = None, persist: bool = True, slurm_node: Optional[str] = None,
        force: bool = False) -> dict[str, Any]:
    """The doctor result for this host. ``probes`` replaces the probe table (tests).

    ``level`` (levels.py): checks above it are not run and absent from the result (not SKIP: a SKIP says the
    host could not be judged, a level says it was not asked); ``only`` naming nothing but such checks is an error.
    ``slurm_node`` / ``force``: the idle guard's (probes/idle.py): the node's SLURM name, and load it even when busy.
    """
    validate(only, exclude, timeouts, expect, level)
    start = time.monotonic()
    expect = expect or {}
    options = probe_options(expect, timeouts, nvidia_smi_path, torch_python, level, state_dir, slurm_node, force)
    selected = registry.select(CATALOGUE, only, exclude, level)
    needed = list(ALWAYS_PROBED) + [name for chk in selected for name in chk.probes]
    if any(name in probe_catalogue.ACTIVE_PROBES for name in needed):
        # The idle guard reads the node before anything loads it, whichever checks are selected (collect() reads it
        # right before each active probe).
        needed.insert(len(ALWAYS_PROBED), probe_catalogue.GUARD)
    deadline = probe_catalogue.Deadline(start + options["timeouts"]["total"], options["timeouts"]["total"])
    envelopes = probe_catalogue.collect(needed, options, probes, deadline)
    roots = registry.roots_for(selected, PROBE_ROOTS)
    checks = registry.blocked([judge(chk, envelopes, expect, roots) for chk in selected])
    persist_states(checks, persist)
    summary = _results.summarize(checks)
    result = {
        "schema_version": _results.SCHEMA_VERSION,
        "level": level,
        "environment": environment(envelopes),
        "checks": checks,
        "summary": summary,
        "overall_status": host_verdict(summary),
        "probes": {name: {"status": env["status"], "reason": env["reason"], "duration_ms": env["duration_ms"]}
                   for name, env in envelopes.items()},
        "total_duration_ms": round((time.monotonic() - start) * 1000.0, 3),
    }
    result = finite_result(result)  # RFC 8259: no NaN/Infinity in the module's JSON
    return make_deterministic(result) if deterministic else result


def judge(chk: registry.Check, envelopes: Mapping[str, Any], expect: Mapping[str, Any],
          roots: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """One check's record; ERROR with the deadline's reason when a probe it reads was not run (timeouts.total).

    ``roots``: probe -> root check id of this run (registry.roots_for): a check whose required probe failed is
    blocked by the root that reports it."""
    not_run = [envelopes[name] for name in chk.probes if envelopes[name].get("not_run")]
    if not not_run:
        return registry.evaluate(chk, envelopes, expect, roots)
    return {"id": chk.id, "title": chk.title, "category": chk.category, "status": ERROR, "message": not_run[0]["reason"],
            "details": {"probes_not_run": [name for name in chk.probes if envelopes[name].get("not_run")]},
            "remediation": "raise timeouts.total, or lower the per-probe timeouts, so every probe fits the doctor run",
            "duration_ms": 0.0}


def persist_states(checks: Sequence[dict[str, Any]], write: bool = True) -> None:
    """Write the state a check hands over in ``details.persist`` ({path, document}: tenant.slo's tenants.json),
    atomically, after evaluation; the check keeps {path, written, error} in its place. ``write`` off (check mode):
    nothing is written and the next run starts from the same state."""
    for chk in checks:
        details = chk.get("details")
        if not isinstance(details, dict) or not isinstance(details.get("persist"), dict):
            continue
        wanted = details["persist"]
        if not wanted.get("path"):
            continue
        outcome: dict[str, Any] = {"path": wanted["path"], "written": False, "error": None}
        if write:
            try:
                _atomic.write_atomic(wanted["path"], json.dumps(wanted.get("document"), indent=2, sort_keys=True) + "\n")
                outcome["written"] = True
            except OSError as exc:
                outcome["error"] = "%s: %s" % (wanted["path"], exc.strerror or exc)
                if chk.get("status") == PASS:  # a state that cannot be kept cannot be judged over time
                    chk.update(status=WARN, message="%s; state not saved: %s" % (chk.get("message"), outcome["error"]))
        details["persist"] = outcome


def environment(envelopes: Mapping[str, Any]) -> dict[str, Any]:
    """Host facts, and per GPU the identity and configuration fleet drift compares across hosts."""
    env = dict(envelopes["host"]["data"] or {})
    env["timestamp_utc"] = datetime.datetime.now(datetime.timezone.utc).isoformat()
    env["hydra_version"] = HYDRA_VERSION
    smi = envelopes["nvidia_smi"]["data"] or {}
    env["driver_version"] = smi.get("driver_version")
    env["cuda_driver_version"] = smi.get("cuda_version")
    env["gpus"] = [_gpu_facts(g, smi.get("driver_version")) for g in smi.get("gpus", [])]
    amd = (envelopes.get("amd_smi") or {}).get("data") or {}
    if not env["gpus"] and amd.get("gpus"):
        # An AMD host (no NVIDIA GPU): the AMD inventory's GPUs, amdgpu driver and ROCm release, tagged by vendor.
        env["gpu_vendor"] = "amd"
        env["driver_version"] = amd.get("driver_version")
        env["amdgpu_driver_kind"] = amd.get("driver_kind")
        env["rocm_version"] = rocm_version.read_rocm_version()
        env["gpus"] = [dict(_gpu_facts(g, amd.get("driver_version")), vendor="amd") for g in amd["gpus"]]
    torch = (envelopes.get("torch") or {}).get("data") or {}
    env["torch_version"] = torch.get("version")
    env["nccl_version"] = torch.get("nccl_version")
    return env


def _gpu_facts(gpu: Mapping[str, Any], driver_version: Optional[str]) -> dict[str, Any]:
    def nested(section: str, key: str) -> Any:
        return (gpu.get(section) or {}).get(key)
    return {
        "index": gpu.get("index"), "pci_bus_id": gpu.get("pci_bus_id"), "uuid": gpu.get("uuid"), "name": gpu.get("name"),
        "driver_version": driver_version, "vbios_version": gpu.get("vbios_version"),
        # What an RMA ticket names the board by; None where the reader does not report them.
        "serial": gpu.get("serial"), "board_part_number": gpu.get("board_part_number"),
        "persistence_mode": gpu.get("persistence_mode"), "ecc_mode": nested("ecc", "current"),
        "mig_mode": nested("mig", "current"), "pcie_gen_max": nested("pcie", "gen_max"),
        "pcie_width_max": nested("pcie", "width_max"), "memory_total_mib": nested("memory", "total_mib"),
    }


def make_deterministic(result: Mapping[str, Any]) -> dict[str, Any]:
    """Sorted checks, no timings and no timestamp: two runs on an unchanged host diff clean."""
    result = dict(result)
    result["checks"] = sorted(
        ({k: v for k, v in chk.items() if k != "duration_ms"} for chk in result["checks"]), key=lambda c: c["id"])
    result["probes"] = {name: {"status": p["status"], "reason": p["reason"]} for name, p in result["probes"].items()}
    result["environment"] = {k: v for k, v in result["environment"].items() if k != "timestamp_utc"}
    result.pop("total_duration_ms", None)
    return result


def finite_result(result: dict[str, Any]) -> dict[str, Any]:
    """The result with every non-finite float (NaN, Infinity) replaced by None, so its JSON is RFC 8259 JSON.

    Each replacement is recorded: in the check's details as ``non_finite_replaced`` (the paths within the check),
    elsewhere in ``environment.non_finite_replaced``.
    """
    elsewhere: list[str] = []
    checks = []
    for chk in result.get("checks") or []:
        found: list[str] = []
        chk = _finite(chk, "", found)
        if found:
            details = chk.get("details") if isinstance(chk.get("details"), dict) else {}
            chk["details"] = dict(details, non_finite_replaced=found)
        checks.append(chk)
    out = _finite(dict((k, v) for k, v in result.items() if k != "checks"), "", elsewhere)
    out["checks"] = checks
    if elsewhere and isinstance(out.get("environment"), dict):
        out["environment"]["non_finite_replaced"] = elsewhere
    return dict((key, out[key]) for key in list(result) if key in out)


def _finite(value: Any, path: str, found: list[str]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        found.append(path or "(value)")
        return None
    if isinstance(value, dict):
        return dict((key, _finite(item, "%s.%s" % (path, key) if path else str(key), found)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return [_finite(item, "%s[%d]" % (path, index), found) for index, item in enumerate(value)]
    return value

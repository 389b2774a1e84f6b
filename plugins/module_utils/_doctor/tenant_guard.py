# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""hydra-tenant-guard, the program the tenant_guard role's timer runs (its zipapp's entry point is
roles/tenant_guard/files/hydra_tenant_guard_main.py).

    hydra-tenant-guard --config /etc/continuum-hydra/tenant-guard.json

One tick: doctor's check tenant.slo (the same state file doctor keeps, <state_dir>/tenants.json), then per VIOLATED
tenant the planned mitigation. Mode recommend writes what it would do to <state_dir>/tenant-guard.json and changes
nothing; mode enforce applies tier 1 (the bully moved into its own cgroup with an io.max / blkio limit) through the
cgroup_limits code and records it in the tenant's state. Tier 2 (MIG) is only ever recommended. Never kills a process.
Exit 0 after a tick (whatever the tenants' state), 2 on a bad config or a failed tier 1.

Tier 1 is _remediate's lifecycle with its cgroup_limits worker; a feature never imports another, so the entry point
hands both in (``remediate``: the ``_remediate.apply`` module, ``worker``: ``_remediate.cgroups.CgroupLimitsWorker``).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import json
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _atomic
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import tenants

MODES = ("recommend", "enforce")
GUARD_FILE = "tenant-guard.json"


class GuardError(Exception):
    """A bad config or a failed tier 1: one line, exit 2."""


class Module:
    """What the remediation lifecycle needs of an AnsibleModule, for the cgroup_limits worker."""

    check_mode = False

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        self.warnings.append(message)


def load_config(path: str) -> dict[str, Any]:
    try:
        with open(path) as handle:
            config = json.load(handle)
    except (OSError, ValueError) as exc:
        raise GuardError("config %s: %s" % (path, exc)) from None
    if not isinstance(config, dict) or config.get("mode") not in MODES:
        raise GuardError("config %s: mode %r is not one of %s" % (
            path, config.get("mode") if isinstance(config, dict) else None, ", ".join(MODES)))
    return config


def tick(config: Mapping[str, Any], remediate: ModuleType, worker: type,
         probes: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """One tick; ``probes`` replaces doctor's probe table (tests)."""
    state_dir = config.get("state_dir") or tenants.DEFAULT_STATE_DIR
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    result = doctor.run(only=["tenant.slo"], expect=config.get("expect") or {}, timeouts=config.get("timeouts") or {},
                        nvidia_smi_path=config.get("nvidia_smi_path") or None, probes=probes, state_dir=state_dir,
                        persist=True)
    chk = result["checks"][0]
    details = chk.get("details") or {}
    report: dict[str, Any] = {"at": now, "mode": config["mode"], "status": chk["status"], "message": chk["message"],
                              "actions": []}
    applied = {}
    for tenant in details.get("tenants") or []:
        plan = tenant.get("mitigation")
        if not plan:
            continue
        action = {"tenant_pid": tenant["pid"], "tenant_key": tenant["key"], "tier": plan["tier"], "why": plan["why"],
                  "cgroup_limits": plan["cgroup_limits"], "mig_gpus": plan["mig_gpus"], "applied": False, "changes": []}
        if config["mode"] == "enforce" and plan["tier"] == 1:
            outcome = apply_tier1(config, plan["cgroup_limits"], remediate, worker)
            action.update(applied=True, changes=outcome.get("changes") or [], changed=outcome.get("changed"),
                          cgroup_version=outcome.get("version"))
            limits = plan["cgroup_limits"][0]
            applied[tenant["key"]] = {"pid": limits["pids"][0], "at": now, "violated_runs": tenant["violated_runs"],
                                      "limit_bps": limits["io_max"][0]["wbps"],
                                      "cgroup": "%s/%s" % (config.get("cgroup_parent") or tenants.BULLY_PARENT, limits["name"])}
        report["actions"].append(action)
    if applied:
        record_tier1(details.get("persist", {}).get("path"), applied)
    _atomic.write_atomic("%s/%s" % (state_dir.rstrip("/"), GUARD_FILE), json.dumps(report, indent=2, sort_keys=True) + "\n")
    return report


def apply_tier1(config: Mapping[str, Any], limits: Sequence[Mapping[str, Any]], remediate: ModuleType,
                worker: type) -> dict[str, Any]:
    module = Module({"root": config.get("cgroup_root") or "/sys/fs/cgroup", "version": config.get("cgroup_version") or "auto",
                     "parent": config.get("cgroup_parent") or tenants.BULLY_PARENT, "limits": limits,
                     "noisy_processes": [], "severity_limits": {}})
    try:
        outcome: dict[str, Any] = remediate.lifecycle(module, worker)
    except remediate.Failure as exc:
        raise GuardError("tier 1 failed: %s" % exc.msg) from None
    return outcome


def record_tier1(path: Optional[str], applied: Mapping[str, Mapping[str, Any]]) -> None:
    """Note in the tenant's state when tier 1 was applied (kept while the same bully is limited)."""
    if not path:
        return
    with open(path) as handle:
        document = json.load(handle)
    for key, tier1 in applied.items():
        record = document.get("tenants", {}).get(key)
        if record is not None and (record.get("tier1") or {}).get("pid") != tier1["pid"]:
            record["tier1"] = tier1
    _atomic.write_atomic(path, json.dumps(document, indent=2, sort_keys=True) + "\n")


def main(argv: Sequence[str], remediate: ModuleType, worker: type) -> int:
    if len(argv) != 2 or argv[0] != "--config":
        sys.stderr.write("usage: hydra-tenant-guard --config PATH\n")
        return 2
    try:
        report = tick(load_config(argv[1]), remediate, worker)
    except (GuardError, doctor.DoctorInputError) as exc:
        sys.stderr.write("hydra-tenant-guard: %s\n" % exc)
        return 2
    sys.stdout.write(json.dumps(report, sort_keys=True) + "\n")
    return 0

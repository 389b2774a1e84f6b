# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""hydra-tenant-guard's entry point: the __main__.py of the zipapp the tenant_guard role builds.

    hydra-tenant-guard --config /etc/continuum-hydra/tenant-guard.json

One tick: doctor's check tenant.slo (the same state file doctor keeps, <state_dir>/tenants.json), then per VIOLATED
tenant the planned mitigation. Mode recommend writes what it would do to <state_dir>/tenant-guard.json and changes
nothing; mode enforce applies tier 1 (the bully moved into its own cgroup with an io.max / blkio limit) through the
cgroup_limits code and records it in the tenant's state. Tier 2 (MIG) is only ever recommended. Never kills a process.
Exit 0 after a tick (whatever the tenants' state), 2 on a bad config or a failed tier 1.
"""

import datetime
import json
import sys

from ansible_collections.continuum.hydra.plugins.module_utils import _atomic
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import tenants
from ansible_collections.continuum.hydra.plugins.module_utils._remediate import apply, cgroups

MODES = ("recommend", "enforce")
GUARD_FILE = "tenant-guard.json"


class GuardError(Exception):
    """A bad config or a failed tier 1: one line, exit 2."""


class Module:
    """What apply.lifecycle needs of an AnsibleModule, for the cgroup_limits worker."""

    check_mode = False

    def __init__(self, params):
        self.params = params
        self.warnings = []

    def warn(self, message):
        self.warnings.append(message)


def load_config(path):
    try:
        with open(path) as handle:
            config = json.load(handle)
    except (OSError, ValueError) as exc:
        raise GuardError("config %s: %s" % (path, exc)) from None
    if not isinstance(config, dict) or config.get("mode") not in MODES:
        raise GuardError("config %s: mode %r is not one of %s" % (
            path, config.get("mode") if isinstance(config, dict) else None, ", ".join(MODES)))
    return config


def tick(config):
    state_dir = config.get("state_dir") or tenants.DEFAULT_STATE_DIR
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    result = doctor.run(only=["tenant.slo"], expect=config.get("expect") or {}, timeouts=config.get("timeouts") or {},
                        nvidia_smi_path=config.get("nvidia_smi_path") or None, state_dir=state_dir, persist=True)
    chk = result["checks"][0]
    details = chk.get("details") or {}
    report = {"at": now, "mode": config["mode"], "status": chk["status"], "message": chk["message"], "actions": []}
    applied = {}
    for tenant in details.get("tenants") or []:
        plan = tenant.get("mitigation")
        if not plan:
            continue
        action = {"tenant_pid": tenant["pid"], "tenant_key": tenant["key"], "tier": plan["tier"], "why": plan["why"],
                  "cgroup_limits": plan["cgroup_limits"], "mig_gpus": plan["mig_gpus"], "applied": False, "changes": []}
        if config["mode"] == "enforce" and plan["tier"] == 1:
            outcome = apply_tier1(config, plan["cgroup_limits"])
            action.update(applied=True, changes=outcome.get("changes") or [], changed=outcome.get("changed"),
                          cgroup_version=outcome.get("version"))
            applied[tenant["key"]] = {"pid": plan["cgroup_limits"][0]["pids"][0], "at": now,
                                      "violated_runs": tenant["violated_runs"],
                                      "limit_bps": plan["cgroup_limits"][0]["io_max"][0]["wbps"],
                                      "cgroup": "%s/%s" % (config.get("cgroup_parent") or tenants.BULLY_PARENT,
                                                           plan["cgroup_limits"][0]["name"])}
        report["actions"].append(action)
    if applied:
        record_tier1(details.get("persist", {}).get("path"), applied)
    _atomic.write_atomic("%s/%s" % (state_dir.rstrip("/"), GUARD_FILE), json.dumps(report, indent=2, sort_keys=True) + "\n")
    return report


def apply_tier1(config, limits):
    module = Module({"root": config.get("cgroup_root") or "/sys/fs/cgroup", "version": config.get("cgroup_version") or "auto",
                     "parent": config.get("cgroup_parent") or tenants.BULLY_PARENT, "limits": limits,
                     "noisy_processes": [], "severity_limits": {}})
    try:
        return apply.lifecycle(module, cgroups.CgroupLimitsWorker)
    except apply.Failure as exc:
        raise GuardError("tier 1 failed: %s" % exc.msg) from None


def record_tier1(path, applied):
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


def main(argv):
    if len(argv) != 2 or argv[0] != "--config":
        sys.stderr.write("usage: hydra-tenant-guard --config PATH\n")
        return 2
    try:
        report = tick(load_config(argv[1]))
    except (GuardError, doctor.DoctorInputError) as exc:
        sys.stderr.write("hydra-tenant-guard: %s\n" % exc)
        return 2
    print(json.dumps(report, sort_keys=True))
    return 0


sys.exit(main(sys.argv[1:]))

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: remediation_plan
short_description: Map a host's failing doctor checks to the roles that fix them
version_added: 0.1.0
description:
  - Turns one host's doctor result into a plan, C(actions) (a role of this collection and the variables that fix one
    check's finding) and C(manual) (findings no role fixes, with the check's own remediation advice), plus C(lines),
    one readable line per entry.
  - Only C(WARN) and C(FAIL) checks are acted on; an C(ERROR) check (a probe that could not run) is listed as manual.
  - "The fixers and the checks they fix by default: C(persistence_on) (gpu.persistence_mode), C(ecc_expected)
    (gpu.ecc_mode), C(power_default) (gpu.power), C(mig_expected) (gpu.mig), C(cgroup_lift) (system.cgroups) and
    C(cgroup_noisy) (system.noisy_processes: processes a check found, limited by severity) and C(tenant_tiers)
    (tenant.slo: tier 1 an I/O limit on a VIOLATED tenant's bully, tier 2 MIG). See C(docs/remediation.md)."
author:
  - continuum.hydra developers (@continuum-hydra)
options:
  _input:
    description: A host's C(continuum.hydra.doctor) result (registered, or the C(doctor) entry of a fleet report host).
    type: dict
    required: true
  remediation_map:
    description:
      - Check id to fixer name, merged over the default map. A null fixer turns a default off; a site's own check id
        can be mapped to a fixer whose finding details it shares.
    type: dict
    default: {}
  cgroup_root:
    description: The cgroup root the C(cgroup_lift) fixer makes the check's limit files relative to.
    type: str
    default: /sys/fs/cgroup
seealso:
  - module: continuum.hydra.doctor
"""

EXAMPLES = r"""
- name: What would fix this host
  ansible.builtin.debug:
    msg: "{{ (hydra_doctor | continuum.hydra.remediation_plan).lines }}"

- name: Leave power caps alone, and fix a site check like persistence mode
  ansible.builtin.set_fact:
    plan: "{{ hydra_doctor | continuum.hydra.remediation_plan({'gpu.power': none, 'site.persistenced': 'persistence_on'}) }}"
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  sample: {"actions": [{"check_id": "gpu.persistence_mode", "status": "WARN", "role": "gpu_settings", "fixer": "persistence_on",
                        "vars": {"gpu_settings_gpus": ["0", "1"], "gpu_settings_persistence_mode": true},
                        "why": "persistence mode on for GPU(s) 0, 1"}],
           "manual": [{"check_id": "gpu.ecc_errors", "status": "FAIL", "message": "1 GPU with uncorrectable ECC errors",
                       "remediation": "Drain the node and reset the GPU.", "why": "no automatic fix"}],
           "lines": ["fix    gpu.persistence_mode (WARN) with gpu_settings: persistence mode on for GPU(s) 0, 1"]}
"""

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, WARN

ACTIONABLE = (WARN, FAIL)

Check = Mapping[str, Any]
# What a fixer returns: ([(role, role vars, what it does)], why nothing can be done or None).
Fix = tuple[list[tuple[str, dict[str, Any], str]], Optional[str]]


def _bad_gpus(check: Check) -> list[dict[str, Any]]:
    return [g for g in (check.get("details") or {}).get("gpus") or [] if g.get("status") in ACTIONABLE]


def _indexes(gpus: Iterable[Mapping[str, Any]]) -> list[str]:
    return [str(g["index"]) for g in gpus if g.get("index") is not None]


def persistence_on(check: Check, options: Mapping[str, Any]) -> Fix:
    gpus = _indexes(_bad_gpus(check))
    if not gpus:
        return [], "no GPU named in the finding"
    return [("gpu_settings", {"gpu_settings_gpus": gpus, "gpu_settings_persistence_mode": True},
             "persistence mode on for GPU(s) %s" % ", ".join(gpus))], None


def _by_expected(check: Check, key: str = "expected") -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for gpu in _bad_gpus(check):
        if gpu.get(key) in ("enabled", "disabled") and gpu.get("index") is not None:
            groups.setdefault(gpu[key], []).append(str(gpu["index"]))
    return groups


def ecc_expected(check: Check, options: Mapping[str, Any]) -> Fix:
    groups = _by_expected(check)
    if not groups:
        return [], "the ECC mode waits for a GPU reset or reboot (no expected mode to set)"
    return [("gpu_settings", {"gpu_settings_gpus": gpus, "gpu_settings_ecc_mode": mode == "enabled"},
             "ECC %s on GPU(s) %s (then reset / reboot)" % (mode, ", ".join(gpus))) for mode, gpus in sorted(groups.items())], None


def mig_expected(check: Check, options: Mapping[str, Any]) -> Fix:
    groups = _by_expected(check)
    if not groups:
        return [], "the MIG mode waits for a GPU reset (no expected mode to set)"
    return [("mig", {"mig_gpus": gpus, "mig_mode": mode}, "MIG %s on GPU(s) %s" % (mode, ", ".join(gpus)))
            for mode, gpus in sorted(groups.items())], None


def power_default(check: Check, options: Mapping[str, Any]) -> Fix:
    groups: dict[float, list[str]] = {}
    for gpu in _bad_gpus(check):
        if gpu.get("default_limit_w") is not None and gpu.get("index") is not None:
            groups.setdefault(float(gpu["default_limit_w"]), []).append(str(gpu["index"]))
    if not groups:
        return [], "no default power limit in the finding"
    return [("gpu_settings", {"gpu_settings_gpus": gpus, "gpu_settings_power_limit": watts},
             "power limit back to its default %g W on GPU(s) %s" % (watts, ", ".join(gpus)))
            for watts, gpus in sorted(groups.items())], None


def _cgroup_of(limit_file: str, root: str) -> Optional[str]:
    """The cgroup (relative to the root; under v1, to the controller's mount) whose file sets a limit."""
    directory = os.path.dirname(limit_file)
    root = root.rstrip("/")
    if not directory.startswith(root + "/"):
        return None
    rel = directory[len(root) + 1:]
    if os.path.basename(limit_file).startswith(("memory.limit_in_bytes", "cpu.cfs_")):
        rel = rel.split("/", 1)[1] if "/" in rel else ""  # v1: drop the controller's mount directory
    return rel or None


def cgroup_lift(check: Check, options: Mapping[str, Any]) -> Fix:
    """Lift the memory / CPU limit that the system.cgroups finding names as too tight."""
    details = check.get("details") or {}
    fraction = details.get("warn_fraction") or 0.5
    actions: list[tuple[str, dict[str, Any], str]] = []
    memory, ram = details.get("memory_limit_bytes"), details.get("host_memory_bytes")
    if memory is not None and ram and memory < fraction * ram and details.get("memory_limit_file"):
        cgroup = _cgroup_of(details["memory_limit_file"], options["cgroup_root"])
        if cgroup:
            actions.append(("cgroup_limits", {"cgroup_limits_limits": [{"cgroup": cgroup, "memory_max": "max"}]},
                            "lift the memory limit of %s" % cgroup))
    cpu, cpus = details.get("cpu_limit"), details.get("host_cpus")
    if cpu is not None and cpus and cpu < fraction * cpus and details.get("cpu_limit_file"):
        cgroup = _cgroup_of(details["cpu_limit_file"], options["cgroup_root"])
        if cgroup:
            actions.append(("cgroup_limits", {"cgroup_limits_limits": [{"cgroup": cgroup, "cpu_percent": "max"}]},
                            "lift the CPU limit of %s" % cgroup))
    return actions, None if actions else "no limit below the root cgroup to lift (a missing controller needs the kernel or systemd)"


def cgroup_noisy(check: Check, options: Mapping[str, Any]) -> Fix:
    """Cluster-Helper's tier 1: the processes the check found, limited by severity (the process's, or the check's)."""
    severity = check.get("status", WARN).lower()
    found = []
    for proc in (check.get("details") or {}).get("processes") or []:
        if proc.get("pid") is None:
            continue
        found.append({"pid": int(proc["pid"]), "name": proc.get("name") or "",
                      "severity": str(proc.get("severity") or severity).lower()})
    if not found:
        return [], "no process named in the finding"
    return [("cgroup_limits", {"cgroup_limits_noisy_processes": found},
             "limit %d noisy process(es) by severity" % len(found))], None


def tenant_tiers(check: Check, options: Mapping[str, Any]) -> Fix:
    """tenant.slo VIOLATED: the mitigation the check planned per tenant (docs/tenant-slos.md). Tier 1: cgroup_limits
    moves the bully into its own group with an io.max / blkio limit scaled by how far over the SLO the tenant is;
    tier 2: the mig role, once tier 1 was applied and the tenant is still over, or when the bully does no I/O."""
    actions: list[tuple[str, dict[str, Any], str]] = []
    reasons = []
    for tenant in (check.get("details") or {}).get("tenants") or []:
        plan = tenant.get("mitigation") or {}
        if plan.get("tier") == 1 and plan.get("cgroup_limits"):
            actions.append(("cgroup_limits", {"cgroup_limits_limits": plan["cgroup_limits"]},
                            "tier 1 for tenant PID %s: %s" % (tenant.get("pid"), plan.get("why"))))
        elif plan.get("tier") == 2 and plan.get("mig_gpus"):
            actions.append(("mig", {"mig_gpus": list(plan["mig_gpus"]), "mig_mode": "enabled"},
                            "tier 2 for tenant PID %s: MIG on GPU(s) %s (%s)" % (
                                tenant.get("pid"), ", ".join(plan["mig_gpus"]), plan.get("why"))))
        elif plan:
            reasons.append("tenant PID %s: %s" % (tenant.get("pid"), plan.get("why") or "no mitigation planned"))
    return actions, None if actions else ("; ".join(reasons) or "no VIOLATED tenant with a mitigation in the finding")


FIXERS: dict[str, Callable[[Check, Mapping[str, Any]], Fix]] = {
    "persistence_on": persistence_on,
    "ecc_expected": ecc_expected,
    "power_default": power_default,
    "mig_expected": mig_expected,
    "cgroup_lift": cgroup_lift,
    "cgroup_noisy": cgroup_noisy,
    "tenant_tiers": tenant_tiers,
}

DEFAULT_MAP = {
    "gpu.persistence_mode": "persistence_on",
    "gpu.ecc_mode": "ecc_expected",
    "gpu.power": "power_default",
    "gpu.mig": "mig_expected",
    "system.cgroups": "cgroup_lift",
    "system.noisy_processes": "cgroup_noisy",
    "tenant.slo": "tenant_tiers",
}


def remediation_plan(result: object, remediation_map: Optional[Mapping[str, Optional[str]]] = None,
                     cgroup_root: str = "/sys/fs/cgroup") -> dict[str, list[Any]]:
    if not isinstance(result, dict):
        raise AnsibleFilterError("remediation_plan: input must be a doctor result (dict), got %s" % type(result).__name__)
    if not isinstance(remediation_map or {}, dict):
        raise AnsibleFilterError("remediation_plan: remediation_map must be a mapping of check id to fixer, got %r"
                                 % (remediation_map,))
    mapping: dict[str, Optional[str]] = dict(DEFAULT_MAP)
    mapping.update(remediation_map or {})
    unknown = sorted(set(str(f) for f in mapping.values() if f is not None and f not in FIXERS))
    if unknown:
        raise AnsibleFilterError("remediation_plan: fixer %r does not exist; fixers: %s" % (unknown[0], ", ".join(sorted(FIXERS))))
    if "checks" not in result:
        raise AnsibleFilterError("remediation_plan: no 'checks' in the input: give a doctor result (%s)"
                                 % (result.get("msg") or "the doctor task may have failed or been skipped"))
    options = {"cgroup_root": cgroup_root}
    plan: dict[str, list[Any]] = {"actions": [], "manual": [], "lines": []}
    for check in result["checks"]:
        status = check.get("status")
        if status not in ACTIONABLE + (ERROR,):
            continue
        fixer = mapping.get(check["id"]) if status in ACTIONABLE else None
        actions, why = FIXERS[fixer](check, options) if fixer else ([], "no automatic fix")
        for role, role_vars, what in actions:
            plan["actions"].append({"check_id": check["id"], "status": status, "role": role, "fixer": fixer,
                                    "vars": role_vars, "why": what})
            plan["lines"].append("fix    %s (%s) with %s: %s" % (check["id"], status, role, what))
        if not actions:
            plan["manual"].append({"check_id": check["id"], "status": status, "message": check.get("message"),
                                   "remediation": check.get("remediation"), "why": why})
            advice = check.get("remediation") or check.get("message") or ""
            plan["lines"].append("manual %s (%s): %s; %s" % (check["id"], status, why, advice))
    return plan


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"remediation_plan": remediation_plan}

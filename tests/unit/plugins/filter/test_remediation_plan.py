"""The remediation_plan filter: which role fixes which finding, and what is left to a person."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.continuum.hydra.plugins.filter.remediation_plan import remediation_plan


def gpu(index, status, **values):
    out = {"index": index, "pci_bus_id": "00000000:%02X:00.0" % index, "uuid": "GPU-%d" % index, "status": status}
    out.update(values)
    return out


def result(*checks):
    return {"overall_status": "failed", "checks": list(checks)}


def check(check_id, status, details=None, remediation="do the thing"):
    return {"id": check_id, "status": status, "message": "%s %s" % (check_id, status), "details": details or {},
            "remediation": remediation}


def test_persistence_on_only_for_the_gpus_the_finding_names():
    plan = remediation_plan(result(check("gpu.persistence_mode", "WARN", {"gpus": [gpu(1, "WARN"), gpu(3, "WARN")]})))
    assert plan["actions"] == [{"check_id": "gpu.persistence_mode", "status": "WARN", "role": "gpu_settings",
                                "fixer": "persistence_on", "why": "persistence mode on for GPU(s) 1, 3",
                                "vars": {"gpu_settings_gpus": ["1", "3"], "gpu_settings_persistence_mode": True}}]
    assert plan["manual"] == []


def test_ecc_and_mig_follow_the_expected_mode_grouped_by_mode():
    plan = remediation_plan(result(
        check("gpu.ecc_mode", "FAIL", {"gpus": [gpu(0, "FAIL", current="disabled", pending="disabled", expected="enabled"),
                                                gpu(1, "PASS", current="enabled", expected="enabled")]}),
        check("gpu.mig", "FAIL", {"gpus": [gpu(2, "FAIL", current="enabled", expected="disabled")]}),
    ))
    assert [(a["role"], a["vars"]) for a in plan["actions"]] == [
        ("gpu_settings", {"gpu_settings_gpus": ["0"], "gpu_settings_ecc_mode": True}),
        ("mig", {"mig_gpus": ["2"], "mig_mode": "disabled"}),
    ]


def test_pending_mode_without_expectation_is_manual():
    pending = gpu(0, "WARN", current="enabled", pending="disabled", expected=None)
    plan = remediation_plan(result(check("gpu.ecc_mode", "WARN", {"gpus": [pending]})))
    assert plan["actions"] == []
    assert plan["manual"][0]["why"] == "the ECC mode waits for a GPU reset or reboot (no expected mode to set)"


def test_power_back_to_each_gpus_default():
    plan = remediation_plan(result(check("gpu.power", "WARN", {"gpus": [
        gpu(0, "WARN", limit_w=300.0, default_limit_w=400.0), gpu(1, "WARN", limit_w=250.0, default_limit_w=400.0),
        gpu(2, "WARN", limit_w=200.0, default_limit_w=350.0)]})))
    assert [a["vars"] for a in plan["actions"]] == [
        {"gpu_settings_gpus": ["2"], "gpu_settings_power_limit": 350.0},
        {"gpu_settings_gpus": ["0", "1"], "gpu_settings_power_limit": 400.0}]


def test_cgroup_lift_names_the_limiting_cgroup_v2_and_v1():
    v2 = check("system.cgroups", "WARN", {"memory_limit_bytes": 2 * 1024 ** 3, "host_memory_bytes": 64 * 1024 ** 3,
                                          "memory_limit_file": "/sys/fs/cgroup/user.slice/user-1000.slice/memory.max",
                                          "cpu_limit": 16, "host_cpus": 16, "cpu_limit_file": "/sys/fs/cgroup/cpu.max",
                                          "warn_fraction": 0.5})
    assert [a["vars"] for a in remediation_plan(result(v2))["actions"]] == [
        {"cgroup_limits_limits": [{"cgroup": "user.slice/user-1000.slice", "memory_max": "max"}]}]
    v1 = check("system.cgroups", "WARN", {"cpu_limit": 1.0, "host_cpus": 16, "warn_fraction": 0.5,
                                          "cpu_limit_file": "/sys/fs/cgroup/cpu/slurm/uid_1000/cpu.cfs_quota_us"})
    assert remediation_plan(result(v1))["actions"][0]["vars"] == {
        "cgroup_limits_limits": [{"cgroup": "slurm/uid_1000", "cpu_percent": "max"}]}
    missing_controller = check("system.cgroups", "WARN", {"controllers": ["cpu"]})
    assert remediation_plan(result(missing_controller))["manual"][0]["check_id"] == "system.cgroups"


def test_noisy_processes_take_the_process_severity_or_the_checks():
    plan = remediation_plan(result(check("system.noisy_processes", "FAIL", {"processes": [
        {"pid": 10, "name": "rsync"}, {"pid": 11, "name": "tar", "severity": "warn"}]})))
    assert plan["actions"][0]["vars"] == {"cgroup_limits_noisy_processes": [
        {"pid": 10, "name": "rsync", "severity": "fail"}, {"pid": 11, "name": "tar", "severity": "warn"}]}


def test_unknown_and_error_checks_are_manual_and_pass_skip_are_ignored():
    plan = remediation_plan(result(check("gpu.ecc_errors", "FAIL", remediation="Drain the node and reset the GPU."),
                                   check("gpu.nvlink", "ERROR"), check("gpu.count", "PASS"), check("gpu.row_remap", "SKIP"),
                                   check("gpu.persistence_mode", "ERROR")))
    assert [(m["check_id"], m["why"]) for m in plan["manual"]] == [
        ("gpu.ecc_errors", "no automatic fix"), ("gpu.nvlink", "no automatic fix"), ("gpu.persistence_mode", "no automatic fix")]
    assert plan["lines"][0] == "manual gpu.ecc_errors (FAIL): no automatic fix; Drain the node and reset the GPU."


def test_map_turns_fixes_off_and_maps_site_checks():
    doctor = result(check("gpu.persistence_mode", "WARN", {"gpus": [gpu(0, "WARN")]}),
                    check("site.persistenced", "WARN", {"gpus": [gpu(5, "WARN")]}))
    plan = remediation_plan(doctor, {"gpu.persistence_mode": None, "site.persistenced": "persistence_on"})
    assert [(a["check_id"], a["vars"]["gpu_settings_gpus"]) for a in plan["actions"]] == [("site.persistenced", ["5"])]
    assert plan["manual"][0]["check_id"] == "gpu.persistence_mode"


@pytest.mark.parametrize("doctor, mapping, message", [
    ("text", None, "remediation_plan: input must be a doctor result (dict), got str"),
    ({"failed": True, "msg": "MODULE FAILURE"}, None, "remediation_plan: no 'checks' in the input: give a doctor result (MODULE FAILURE)"),
    (result(), {"gpu.x": "reboot_everything"}, "remediation_plan: fixer 'reboot_everything' does not exist; fixers: cgroup_lift"),
    (result(), ["gpu.x"], "remediation_plan: remediation_map must be a mapping"),
])
def test_bad_input_is_one_clear_line(doctor, mapping, message):
    with pytest.raises(AnsibleFilterError) as err:
        remediation_plan(doctor, mapping)
    assert str(err.value).startswith(message)


def test_tenant_slo_violated_maps_to_tier1_cgroup_limits_and_tier2_mig():
    tier1 = {"tier": 1, "why": "limit PID 4200 (dd) to 4800000 B/s read and write on 254:0", "mig_gpus": [],
             "cgroup_limits": [{"name": "tenant-bully-4200", "pids": [4200],
                                "io_max": [{"device": "254:0", "rbps": 4800000, "wbps": 4800000}]}]}
    tier2 = {"tier": 2, "why": "tier 1 did not help", "mig_gpus": ["1"], "cgroup_limits": []}
    plan = remediation_plan(result(check("tenant.slo", "FAIL", {"tenants": [
        {"pid": 4100, "state": "VIOLATED", "mitigation": tier1}, {"pid": 4101, "state": "VIOLATED", "mitigation": tier2},
        {"pid": 4102, "state": "NORMAL"}]})))
    assert [(a["role"], a["fixer"], a["vars"]) for a in plan["actions"]] == [
        ("cgroup_limits", "tenant_tiers", {"cgroup_limits_limits": tier1["cgroup_limits"]}),
        ("mig", "tenant_tiers", {"mig_gpus": ["1"], "mig_mode": "enabled"})]
    assert "tier 1 for tenant PID 4100: limit PID 4200 (dd)" in plan["lines"][0]


def test_tenant_slo_degraded_or_without_a_bully_is_manual():
    plan = remediation_plan(result(check("tenant.slo", "WARN", {"tenants": [{"pid": 4100, "state": "DEGRADED"}]})))
    assert plan["actions"] == [] and plan["manual"][0]["why"] == "no VIOLATED tenant with a mitigation in the finding"
    none = {"tier": None, "why": "no co-located process does storage I/O or holds GPU memory: nothing to limit",
            "cgroup_limits": [], "mig_gpus": []}
    plan = remediation_plan(result(check("tenant.slo", "FAIL", {"tenants": [{"pid": 4100, "mitigation": none}]})))
    assert plan["manual"][0]["why"] == "tenant PID 4100: " + none["why"]

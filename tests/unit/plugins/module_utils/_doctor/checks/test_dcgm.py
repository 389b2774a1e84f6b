"""gpu.dcgm_diag on recorded dcgmi diag -j outputs: the status per GPU, faults planted by editing copies."""

import copy
import json

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import levels
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import dcgm as dcgm_checks
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import dcgm
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvidia_smi
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS, READ_ABSENT, READ_FAILED, READ_OK, SKIP, WARN
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

CHECK = next(c for c in CATALOGUE if c.id == "gpu.dcgm_diag")
GB10_R1 = ("glimmer-burnin", "gb10-dcgm423-r1-persistence-off.json")
GB10_R2_SKIP = ("glimmer-burnin", "gb10-dcgm452-r2-memory-pcie-skip.json")
GB10_R2_ALLOWED = ("glimmer-burnin", "gb10-dcgm452-r2-plugins-allowed.json")
T4_R2 = ("virtualclient", "t4-dcgm31-r2-healthy.json")
T4_R3 = ("virtualclient", "t4-dcgm31-r3-healthy-edited-line.json")


def doc(recording):
    return json.loads(read_fixture("dcgm-diag", *recording))


def judge(raw, rc=0, smi=None, level=2):
    data = dict(dcgm.parse_diag_json(raw), exit_code=rc, exit_meaning=dcgm.exit_meaning(rc), level=level)
    smi_env = {"status": READ_ABSENT, "data": None, "reason": "no nvidia-smi"} if smi is None else \
        {"status": READ_OK, "data": smi, "reason": None}
    return registry.evaluate(CHECK, {"dcgm_diag": {"status": READ_OK, "data": data, "reason": None}, "nvidia_smi": smi_env}, {})


def by_gpu(result):
    return dict((g["dcgm_entity"], g["status"]) for g in result["details"]["gpus"])


def _test(raw, name):
    root = raw.get("DCGM GPU Diagnostic") or raw.get("DCGM Diagnostic")
    return next(t for c in root["test_categories"] for t in c["tests"] if t["name"] == name)


def test_the_check_is_deep_and_reads_the_probe():
    assert CHECK.level == levels.DEEP and CHECK.requires == ("dcgm_diag",)


def test_healthy_dcgm_31_run_passes_and_names_the_skipped_test():
    result = judge(doc(T4_R3), level=3)
    assert result["status"] == PASS
    assert result["message"] == "dcgmi diag -r 3: 1 GPU passed 16 tests; skipped, not passed: EUD Test skipped"
    assert by_gpu(result) == {"GPU 0": PASS}


def test_persistence_off_written_as_fail_with_config_severity_is_a_warn_for_that_gpu():
    for recording in (GB10_R1, GB10_R2_ALLOWED):
        result = judge(doc(recording), rc=226)
        assert result["status"] == WARN, recording
        assert by_gpu(result) == {"GPU 0": WARN}
        assert "GPU 0 warned in software" in result["message"]
        assert result["details"]["gpus"][0]["messages"][0].endswith("[error 29, CONFIG]")


def test_memory_and_pcie_skipped_by_the_sku_allowlist_is_not_a_pass():
    result = judge(doc(GB10_R2_SKIP), rc=226)
    assert result["status"] == WARN
    assert "GPU 0 not tested (memory skipped, pcie skipped)" in result["message"]


def _plant_power_fail(raw, gpu, severity=None, message="Detected 1 power violations"):
    """Targeted Power of the T4 recording failed on ``gpu`` (the recording copied to 4 GPUs, as on a 4x A10G)."""
    raw = copy.deepcopy(raw)
    for category in raw["DCGM GPU Diagnostic"]["test_categories"]:
        for test in category["tests"]:
            results = test["results"]
            if results and "gpu_ids" in results[0]:
                test["results"] = [dict(results[0], gpu_ids=str(n)) for n in range(4)]
    power = _test(raw, "Targeted Power")["results"][gpu]
    if severity is None:
        power.update(status="Fail", warnings=message)
    else:
        power.update(status="Fail", warnings=[{"warning": message, "error_id": 41, "error_category": 9, "error_severity": severity}])
    return raw


def test_a_failing_test_on_one_gpu_fails_naming_that_gpu_and_nvidia_smi_names_it():
    smi = parse_nvidia_smi(read_fixture("nvidia-smi", "tesla-t4.xml"))
    result = judge(_plant_power_fail(doc(T4_R3), 0), rc=226, smi=smi)
    assert result["status"] == FAIL
    assert result["message"] == "dcgmi diag -r 2: GPU 0 failed Targeted Power"
    assert by_gpu(result) == {"GPU 0": FAIL, "GPU 1": PASS, "GPU 2": PASS, "GPU 3": PASS}
    gpu0 = result["details"]["gpus"][0]
    assert gpu0["pci_bus_id"] == smi["gpus"][0]["pci_bus_id"] and gpu0["uuid"] == smi["gpus"][0]["uuid"]
    assert gpu0["messages"] == ["Detected 1 power violations"]
    assert result["remediation"] == dcgm_checks.FAULT_ADVICE


@pytest.mark.parametrize("version, severity, status", [
    ("3.3.8", 2, FAIL),  # ISOLATE
    ("3.3.8", 6, FAIL),  # RESET
    ("3.3.8", 1, WARN),  # MONITOR since 3.3.1
    ("3.3.8", 5, WARN),  # CONFIG
    ("3.3.0", 1, FAIL),  # ISOLATE before 3.3.1
    ("3.3.0", 0, WARN),  # MONITOR before 3.3.1
])
def test_a_fail_is_a_warn_only_when_every_warning_has_a_benign_severity_in_its_versions_numbering(version, severity, status):
    raw = _plant_power_fail(doc(T4_R3), 1, severity=severity)
    raw["DCGM GPU Diagnostic"]["version"] = version
    result = judge(raw, rc=226)
    assert result["status"] == status
    assert by_gpu(result)["GPU 1"] == status and by_gpu(result)["GPU 0"] == PASS


def test_exit_205_is_a_fail_even_when_the_rows_only_warn():
    result = judge(doc(GB10_R2_ALLOWED), rc=205)
    assert result["status"] == FAIL
    assert result["message"].startswith("dcgmi diag -r 2: dcgmi exited 205: a failure asks to isolate the GPU")


def test_exit_226_with_nothing_failing_in_the_json_is_an_error_not_a_pass():
    result = judge(doc(T4_R2), rc=226)
    assert result["status"] == ERROR and "exited 226 (a test failed) but its JSON reports no failure" in result["message"]
    assert judge(doc(T4_R2), rc=0)["status"] == PASS


def test_a_test_failing_with_every_gpu_passing_is_a_diagnostic_error_not_a_gpu_fault():
    raw = doc(GB10_R2_ALLOWED)
    _test(raw, "software")["results"][0].update(status="Pass", warnings=[])
    _test(raw, "software")["test_summary"] = {"status": "Pass"}
    # NVIDIA/DCGM#253: pcie Fail in test_summary while the GPU's own result is Pass (a child process error).
    _test(raw, "pcie")["test_summary"] = {"status": "Fail", "warnings": [
        {"warning": "Child process error", "error_id": 99, "error_category": 8, "error_severity": 3}]}
    result = judge(raw, rc=226)
    assert result["status"] == ERROR
    assert "pcie failed as a test with no GPU at fault (diagnostic error): Child process error [error 99, UNKNOWN]" in result["message"]
    assert by_gpu(result) == {"GPU 0": PASS}


def test_host_wide_deployment_failure_of_dcgm_3x_fails_the_host():
    raw = doc(T4_R2)
    _test(raw, "CUDA Main Library")["results"][0].update(
        status="Fail", warnings="Cannot open library libcuda.so: 'libcuda.so: cannot open shared object file'")
    result = judge(raw, rc=226)
    assert result["status"] == FAIL
    assert result["message"].startswith("dcgmi diag -r 2: CUDA Main Library failed: Cannot open library libcuda.so")
    assert result["details"]["host"]


def test_probe_absent_is_skip_and_probe_error_is_error_with_the_reason():
    smi = {"status": READ_ABSENT, "data": None, "reason": "x"}
    absent = registry.evaluate(CHECK, {"dcgm_diag": {"status": READ_ABSENT, "data": None, "reason": "dcgmi not found"},
                                       "nvidia_smi": smi}, {})
    assert absent["status"] == SKIP and absent["message"] == "dcgmi not found"
    failed = registry.evaluate(CHECK, {"dcgm_diag": {"status": READ_FAILED, "data": None,
                                                     "reason": "dcgmi diag -j: output is not valid JSON"}, "nvidia_smi": smi}, {})
    assert failed["status"] == ERROR and "output is not valid JSON" in failed["message"]


def _all_pass(raw):
    for category in raw["DCGM GPU Diagnostic"]["test_categories"]:
        for test in category["tests"]:
            for result in test["results"]:
                result.update(status="Pass", warnings="")
    return raw


def test_a_gpu_nvidia_smi_lists_but_missing_from_the_json_fails_naming_it():
    raw = _all_pass(_plant_power_fail(doc(T4_R3), 0))  # 4 GPUs, all Pass
    for category in raw["DCGM GPU Diagnostic"]["test_categories"]:
        for test in category["tests"]:
            test["results"] = [r for r in test["results"] if r.get("gpu_ids") != "3"]
    one = parse_nvidia_smi(read_fixture("nvidia-smi", "tesla-t4.xml"))
    smi = dict(one, gpus=[dict(one["gpus"][0], index=n) for n in range(4)])
    assert judge(raw, smi=dict(one, gpus=smi["gpus"][:3]))["status"] == PASS
    result = judge(raw, smi=smi)
    assert result["status"] == FAIL
    assert result["message"].startswith("dcgmi diag -r 2: GPU 3 missing from dcgmi diag's results (nvidia-smi lists 0, 1, 2, 3")


def test_a_gpu_in_dcgms_entity_list_without_any_result_is_not_a_pass():
    raw = doc(GB10_R2_ALLOWED)
    _test(raw, "software")["results"][0].update(status="Pass", warnings=[])
    _test(raw, "software")["test_summary"] = {"status": "Pass"}
    assert judge(raw)["status"] == PASS
    raw["entity_groups"][0]["entities"].append({"entity_id": 1, "device_id": "2e12", "serial_num": "x"})
    result = judge(raw)
    assert result["status"] == WARN and "GPU 1 not tested (in DCGM's entity list, no result)" in result["message"]


def test_tests_not_run_with_empty_results_are_not_a_pass():
    raw = doc(GB10_R2_SKIP)
    _test(raw, "software")["results"][0].update(status="Pass", warnings=[])
    _test(raw, "software")["test_summary"] = {"status": "Pass"}
    for name in ("memory", "pcie"):
        _test(raw, name).update(results=[], test_summary={"status": "Not Run"})
    result = judge(raw)
    assert result["status"] == WARN and "GPU 0 not tested (no result in memory, pcie)" in result["message"]


def test_dcgm_3x_skips_naming_no_gpu_are_not_a_pass_of_zero_gpus():
    raw = doc(T4_R2)
    for category in raw["DCGM GPU Diagnostic"]["test_categories"]:
        if category["category"] != "Deployment":
            for test in category["tests"]:
                test["results"] = [{"status": "Skip", "warnings": "", "info": ""}]
    result = judge(raw)
    assert result["status"] == WARN and "no GPU tested: PCIe skipped, GPU Memory skipped" in result["message"]


def test_iterations_whose_overall_result_fails_is_not_a_pass():
    result = judge({"iterations": [doc(T4_R2)], "Overall Result": "Fail"})
    assert result["status"] == ERROR and "Overall Result is 'Fail'" in result["message"]
    assert judge({"iterations": [doc(T4_R2)], "Overall Result": "Pass"})["status"] == PASS


def test_a_gpu_dcgm_lists_but_gave_no_result_is_not_tested_and_one_it_does_not_list_is_lost():
    raw = doc(GB10_R2_ALLOWED)
    _test(raw, "software")["results"][0].update(status="Pass", warnings=[])
    _test(raw, "software")["test_summary"] = {"status": "Pass"}
    raw["entity_groups"][0]["entities"].append({"entity_id": 1, "device_id": "2e12", "serial_num": "x"})
    one = parse_nvidia_smi(read_fixture("nvidia-smi", "tesla-t4.xml"))
    smi = dict(one, gpus=[dict(one["gpus"][0], index=n) for n in range(3)])
    result = judge(raw, smi=smi)
    assert result["status"] == FAIL and result["message"].startswith("dcgmi diag -r 2: GPU 2 missing from dcgmi diag's results")
    assert "GPU 1 not tested" not in result["message"]  # the message names the worst status's problems
    assert judge(raw, smi=dict(one, gpus=smi["gpus"][:2]))["status"] == WARN

"""gpu.rvs on the RVS user guide's recorded runs: PASS, and FAIL per GPU when a verdict line or summary row fails."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import levels
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import rvs
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS, READ_ABSENT, READ_OK, SKIP
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

CHECK = next(c for c in CATALOGUE if c.id == "gpu.rvs")


def log(module):
    return read_fixture("rvs", "rvs-user-guide", module + ".log")


def judge(text):
    return registry.evaluate(CHECK, {"rvs": {"status": READ_OK, "data": rvs.parse_rvs(text), "reason": None}}, {})


def test_the_check_is_deep():
    assert CHECK.level == levels.DEEP


@pytest.mark.parametrize("module", ["babel", "gm", "gst", "iet", "mem", "pbqt", "pebb", "peqt"])
def test_recorded_passing_runs_pass(module):
    result = judge(log(module))
    assert result["status"] == PASS and result["message"] == "rvs: 1 action passed on 8 GPUs"


def test_recorded_smqt_failure_names_each_gpu():
    result = judge(log("smqt"))
    assert result["status"] == FAIL
    assert result["message"] == ("rvs: GPU 3254 failed action_1 (smqt); GPU 50599 failed action_1 (smqt); "
                                 "GPU 33367 failed action_1 (smqt)")
    assert [g["gpu_id"] for g in result["details"]["gpus"]] == ["3254", "50599", "33367"]


def test_a_gst_target_missed_names_the_gpu_with_its_pci_address():
    text = log("gst").replace("[GPU:: 27226] GFLOPS 1068301 Target GFLOPS: 0 met: TRUE",
                              "[GPU:: 27226] GFLOPS 1068301 Target GFLOPS: 1200000 met: FALSE")
    result = judge(text)
    assert result["status"] == FAIL
    assert result["message"] == "rvs: GPU 27226 (0000:15:00.0) failed gst-Tflops-2K2K2K-trig-fp4 (gst)"
    assert result["details"]["gpus"][0]["index"] == 1


def test_a_failing_summary_row_alone_fails():
    text = log("babel").replace("| babel-double-825MiB              | BABEL          | PASS ",
                                "| babel-double-825MiB              | BABEL          | FAIL ")
    result = judge(text)
    assert result["status"] == FAIL and result["message"] == "rvs: action babel-double-825MiB (babel) FAIL in the RVS summary"


def test_peqt_false_without_a_gpu_names_the_action():
    result = judge(log("peqt").replace("[pcie_act_1] peqt true", "[pcie_act_1] peqt false"))
    assert result["status"] == FAIL and result["message"].startswith("rvs: pcie_act_1 (peqt) failed: [pcie_act_1] peqt false")


def test_nothing_to_judge_is_an_error_and_absent_rvs_is_skip():
    result = judge("RVS-ERROR [gst] Unable to load rocblas\n")
    assert result["status"] == ERROR
    assert result["message"] == "rvs printed no result doctor can judge; first error: RVS-ERROR [gst] Unable to load rocblas"
    absent = registry.evaluate(CHECK, {"rvs": {"status": READ_ABSENT, "data": None, "reason": "rvs not found"}}, {})
    assert absent["status"] == SKIP


def test_error_lines_beside_passing_results_are_error_not_pass():
    lines = log("iet").splitlines()
    # An action that broke on one GPU: RVS logs the error and carries on, exit 0, the other GPUs' verdicts pass.
    lines.insert(len(lines) // 2, "[ERROR ] [ 61123.554231] [iet-stress-1400W-true] hipMalloc failed on GPU 42583")
    result = judge("\n".join(lines))
    assert result["status"] == ERROR and "hipMalloc failed on GPU 42583" in result["message"]
    assert judge(log("iet"))["status"] == PASS

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


# pbqt peers, exit status and RVS's error lines (issue 23).

PAIR_TRUE = "[GPU:: 2 - 42583 - 0000:05:00.0] [GPU:: 3 - 27226 - 0000:15:00.0] peers:true distance:15 xGMI:15"
PAIR_FALSE = "[GPU:: 2 - 42583 - 0000:05:00.0] [GPU:: 3 - 27226 - 0000:15:00.0] peers:false distance:-1 xGMI:-1"


def test_two_gpus_that_are_not_peers_fail_naming_the_pair():
    result = judge(log("pbqt").replace(PAIR_TRUE, PAIR_FALSE))
    assert result["status"] == FAIL
    assert result["message"].startswith("rvs: GPU 42583 (0000:05:00.0) and GPU 27226 (0000:15:00.0) are not peers in "
                                        "xgmi_d2d_unidir_bandwidth (pbqt)")
    assert [g["gpu_id"] for g in result["details"]["gpus"]] == ["42583", "27226"]


def test_no_peers_found_is_a_fail_naming_the_pairs_not_an_error_without_result():
    # Every pair false: RVS runs no bandwidth test and logs "p2p-bandwidth No peers found" (pbqt.so/src/action.cpp).
    lines = [line.replace("peers:true distance:15 xGMI:15", "peers:false distance:-1 xGMI:-1")
             for line in log("pbqt").splitlines()[:9]]
    lines.append("[ERROR ] [302380.357402] [xgmi_d2d_unidir_bandwidth] p2p-bandwidth No peers found")
    result = judge("\n".join(lines))
    assert result["status"] == FAIL and "GPU 42583 (0000:05:00.0) and GPU 27226 (0000:15:00.0) are not peers" in result["message"]
    assert "(and 3 more)" in result["message"] and "first error: [ERROR ] [302380.357402] [xgmi_d2d_unidir_bandwidth] " \
        "p2p-bandwidth No peers found" in result["message"]
    # The 2018 form, a distinct pair planted false in the issue-254 recording.
    old = read_fixture("rvs", "rvs-issue-254", "pqt-p2p.log").replace("p2p 58162 51205 true", "p2p 58162 51205 false")
    assert judge(old)["message"] == "rvs: GPU 58162 and GPU 51205 are not peers in action_1 (?)"


def test_a_non_zero_exit_after_verdicts_is_judged_and_internal_errors_reach_the_message():
    data = dict(rvs.parse_rvs(log("smqt") + "\nRVS-ERROR [SMQT] [action_1] internal error\n"), exit_code=1)
    result = registry.evaluate(CHECK, {"rvs": {"status": READ_OK, "data": data, "reason": None}}, {})
    assert result["status"] == FAIL and result["message"].endswith(
        "; rvs exited with rc 1; first error: RVS-ERROR [SMQT] [action_1] internal error")
    passing = dict(rvs.parse_rvs(log("iet")), exit_code=255)
    result = registry.evaluate(CHECK, {"rvs": {"status": READ_OK, "data": passing, "reason": None}}, {})
    assert result["status"] == ERROR and result["message"].startswith("rvs exited with rc 255 after passing results")

"""doctor's checks on the recorded amd-smi outputs of each release (tests/fixtures/amd/README.md), and on copies with
a fault planted: an ECC error, "N/A" where a reading should be, a GPU gone from one of the calls. A fault is FAIL or
ERROR, never PASS."""

import json

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.amd_smi import parse_amd_smi
from ansible_collections.continuum.hydra.tests.support.amd import (
    MI210_STATIC,
    STRIX_LIST,
    STRIX_STATIC,
    amd,
    every_leaf_na,
    judge,
    metric_text,
    rocm60_metric,
    rocm60_static,
    rx6600_metric,
)

# The checks that read amd-smi metric, and those every healthy GPU must be judged by (not SKIP).
READINGS = ("gpu.temperature", "gpu.power", "gpu.pcie_link", "gpu.ecc_errors", "gpu.clocks", "gpu.xgmi")
JUDGED = ("gpu.count", "gpu.model", "gpu.temperature", "gpu.power", "gpu.pcie_link", "gpu.ecc_errors")


def rocm60(metric=None):
    """The amd_smi probe's data of the ROCm 6.0 spelling of the MI210 recording and ``metric``."""
    return amd(parse_amd_smi(json.dumps(rocm60_static()), json.dumps(metric or rocm60_metric())))


def statuses(data, checks=READINGS):
    return dict((check_id, judge(check_id, data)["status"]) for check_id in checks)


def test_a_healthy_rocm60_gpu_is_judged_with_its_values():
    data = rocm60()
    assert all(judge(c, data)["status"] in ("PASS", "WARN") for c in JUDGED), statuses(data, JUDGED)
    record = judge("gpu.temperature", data)
    assert record["details"]["gpus"][0]["to_slowdown_c"] == 63  # hotspot 37 C of the MI210's 100 C
    assert judge("gpu.xgmi", data)["status"] == "PASS"  # AMDSMI_XGMI_STATUS_NO_ERRORS
    assert judge("gpu.ecc_errors", data)["status"] == "PASS"


def test_a_rocm60_uncorrectable_ecc_error_fails():
    # Before: ROCm 6.0's ecc.total_uncorrectable and ecc_block were not read, and the 3 errors were dropped (PASS).
    record = judge("gpu.ecc_errors", rocm60(rocm60_metric(uncorrectable=3)))
    assert record["status"] == "FAIL" and "3" in record["message"]


@pytest.mark.parametrize("status", ["AMDSMI_XGMI_STATUS_ERROR", "AMDSMI_XGMI_STATUS_MULTIPLE_ERRORS"])
def test_an_xgmi_error_status_fails(status):
    # Before: the status name was taken for an error string where a count belongs, and the check said SKIP.
    record = judge("gpu.xgmi", rocm60(rocm60_metric(xgmi=status)))
    assert record["status"] == "FAIL" and status in record["message"]


def test_an_xgmi_status_amd_smi_does_not_have_is_an_error():
    record = judge("gpu.xgmi", rocm60(rocm60_metric(xgmi="AMDSMI_XGMI_STATUS_SOMETHING_NEW")))
    assert record["status"] == "ERROR" and "AMDSMI_XGMI_STATUS_SOMETHING_NEW" in record["message"]


def test_a_dead_gpu_writing_na_everywhere_is_never_pass():
    # amd-smi writes "N/A" for every failed library call: an MI210 whose static output gives temperature limits and
    # ECC enabled, but whose every reading is "N/A", cannot be read. Before: SKIP ("nothing readable").
    dead = [dict(every_leaf_na(rx6600_metric()[0]), gpu=0)]
    found = statuses(amd(parse_amd_smi(MI210_STATIC, metric_text(dead))))
    assert found["gpu.temperature"] == found["gpu.ecc_errors"] == "ERROR", found
    # gpu.power judges the cap static gives (300 W, the default); socket power "N/A" is by design on a guest VM
    # (ROCm/device-metrics-exporter docs/configuration/metricslist.md), so it is not a reading that failed.
    assert "PASS" not in [status for check_id, status in found.items() if check_id != "gpu.power"], found


def test_na_ecc_counts_with_ecc_enabled_are_an_error_not_ecc_disabled():
    doc = rx6600_metric()
    doc[0]["ecc"] = dict((key, "N/A") for key in doc[0]["ecc"])
    record = judge("gpu.ecc_errors", amd(parse_amd_smi(MI210_STATIC, metric_text(doc))))
    assert record["status"] == "ERROR" and "ECC as enabled" in record["message"]


@pytest.mark.parametrize("metric", ["[]", '{"gpu_data": []}'])
def test_a_gpu_gone_from_amd_smi_metric_is_an_error(metric):
    # The recorded Strix Halo static and list, and a metric that lists no GPU (lost between the calls).
    found = statuses(amd(parse_amd_smi(STRIX_STATIC, metric, STRIX_LIST)))
    assert found["gpu.temperature"] == found["gpu.power"] == "ERROR", found
    assert "PASS" not in found.values(), found


def test_the_strix_halo_recording_names_the_apu_and_its_in_box_driver():
    data = amd(parse_amd_smi(STRIX_STATIC, "[]", STRIX_LIST))
    record = judge("gpu.count", data)
    assert record["status"] == "PASS" and record["details"]["gpus"][0]["pci_bus_id"] == "0000:c4:00.0"
    assert "Radeon 8060S" in judge("gpu.model", data)["message"]
    assert "kernel 6.17.1-300.fc43.x86_64" in judge("driver.amd_smi", data)["message"]
    # The APU's 0 W caps are no cap: nothing for gpu.power to judge or gpu_settings to set.
    assert judge("gpu.power", data)["details"]["gpus"][0].get("limit_w") is None

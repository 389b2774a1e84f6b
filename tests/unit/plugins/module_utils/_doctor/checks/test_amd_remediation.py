"""The checks NVIDIA and AMD GPUs share word their remediation for the vendor of the GPUs they blame."""

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvidia_smi
from ansible_collections.continuum.hydra.tests.support.amd import amd_smi_data, judge, metric_text, rx6600_metric, with_ecc
from ansible_collections.continuum.hydra.tests.support.envelopes import ok
from ansible_collections.continuum.hydra.tests.support.fleet import UNCORRECTABLE_ECC, plant
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture


def test_an_amd_ecc_failure_says_amd_smi_reset_not_nvidia_smi():
    record = judge("gpu.ecc_errors", amd_smi_data(with_ecc(uncorrectable=2, umc_uncorrectable=2)))
    assert record["status"] == "FAIL"
    assert "`amd-smi reset --gpureset --gpu <index>`" in record["remediation"] and "nvidia-smi" not in record["remediation"]
    assert record["details"]["gpus"][0]["vendor"] == "amd"


def test_an_amd_power_cap_below_default_says_amd_smi_set_power_cap():
    data = amd_smi_data()
    data["gpus"][0]["power"].update(limit_w=250, default_limit_w=300)
    record = judge("gpu.power", data)
    assert record["status"] == "WARN" and "power capped" in record["message"]
    assert record["remediation"] == ("Restore the default limit with `amd-smi set --gpu <index> --power-cap <default watts>` "
                                     "unless the cap is intended.")


def test_an_unreadable_amd_value_points_at_amd_smi_metric():
    doc = rx6600_metric()
    doc[0]["temperature"]["hotspot"] = "AMDSMI_STATUS_NOT_SUPPORTED_ERROR"
    doc[0]["temperature"]["edge"] = "AMDSMI_STATUS_UNEXPECTED_DATA"
    record = judge("gpu.temperature", amd_smi_data(metric_text(doc)))
    assert record["status"] == "ERROR", record["message"]
    assert "`amd-smi metric --gpu <index>`" in record["remediation"] and "Xids" not in record["remediation"]


def test_a_host_with_both_vendors_failing_gets_both_commands():
    smi = parse_nvidia_smi(plant(read_fixture("nvidia-smi", "a100-sxm4-v12.xml"), UNCORRECTABLE_ECC))
    record = judge("gpu.ecc_errors", amd_smi_data(with_ecc(uncorrectable=2, umc_uncorrectable=2)), nvidia_smi=ok(smi))
    assert record["status"] == "FAIL" and record["message"].startswith("2 of 2 GPUs")
    nvidia, amd = record["remediation"].split(" On the AMD GPUs: ")
    assert "`nvidia-smi -r -i <index>`" in nvidia and "`amd-smi reset --gpureset --gpu <index>`" in amd


def test_nvidia_only_failures_keep_the_nvidia_text():
    smi = parse_nvidia_smi(plant(read_fixture("nvidia-smi", "a100-sxm4-v12.xml"), UNCORRECTABLE_ECC))
    record = judge("gpu.ecc_errors", amd_smi_data(), nvidia_smi=ok(smi))
    assert record["status"] == "FAIL" and "amd-smi" not in record["remediation"]
    assert "vendor" not in record["details"]["gpus"][0]

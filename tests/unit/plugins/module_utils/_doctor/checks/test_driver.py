"""The driver and visibility checks on recorded nvidia-smi output, with faults planted by editing copies of the recordings."""


import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.tests.support.envelopes import absent, error, ok
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path, read_fixture
from ansible_collections.continuum.hydra.tests.support.nvidia import A100_UUID, fake_nvidia_smi, gpus, judge, named, smi


def test_seven_gpus_where_eight_are_expected_fails_naming_the_missing_count_and_address():
    seven = smi("a100-sxm4-v12.xml", gpus(7))
    assert len(seven["gpus"]) == 7
    on_bus = [{"address": "0000:01:00.0", "device_id": "0x20b2", "class": "0x030200", "driver": "nvidia"}] + [
        {"address": "0000:%02x:00.0" % (0x10 + i), "device_id": "0x20b2", "class": "0x030200", "driver": "nvidia"}
        for i in range(1, 8)]
    record = judge("gpu.count", seven, {"gpu_count": 8}, nvidia_pci=ok({"gpus": on_bus, "nvswitches": []}))
    assert record["status"] == "FAIL" and record["details"]["attached_gpus"] == 7
    assert record["message"] == ("7 GPUs where 8 are expected: 1 missing; on the PCI bus but not seen by the "
                                 "driver: 0000:17:00.0")
    assert judge("gpu.count", smi("a100-sxm4-v12.xml", gpus(8)), {"gpu_count": 8})["status"] == "PASS"
    assert judge("gpu.count", smi("a100-sxm4-v12.xml", gpus(9)), {"gpu_count": 8})["status"] == "FAIL"
    assert judge("gpu.count", seven)["status"] == "PASS"  # informational without an expectation


def test_a_gpu_on_the_pci_bus_the_driver_does_not_see_fails_gpu_count_without_an_expectation():
    # only: [gpu] leaves runtime.gpu_passthrough out: gpu.count must not PASS a host that lost a GPU.
    one = smi("a100-sxm4-v12.xml")
    on_bus = [{"address": "0000:01:00.0", "device_id": "0x20b2", "class": "0x030200", "driver": "nvidia"},
              {"address": "0000:c1:00.0", "device_id": "0x20b2", "class": "0x030200", "driver": None}]
    record = judge("gpu.count", one, nvidia_pci=ok({"gpus": on_bus, "nvswitches": []}))
    assert record["status"] == "FAIL" and "0000:c1:00.0" in record["message"], record["message"]
    handed_to_vm = [on_bus[0], dict(on_bus[1], driver="vfio-pci")]
    assert judge("gpu.count", one, nvidia_pci=ok({"gpus": handed_to_vm, "nvswitches": []}))["status"] == "PASS"
    in_container = judge("gpu.count", one, nvidia_pci=ok({"gpus": on_bus, "nvswitches": []}),
                         host=ok({"is_container": True, "is_vm": False, "is_wsl": False}))
    assert in_container["status"] == "PASS"


def test_gpu_count_and_model_with_an_expectation_fail_when_nvidia_smi_is_absent():
    count = judge("gpu.count", None, {"gpu_count": 8})
    assert count["status"] == "FAIL" and count["message"].startswith("0 of 8 expected GPUs visible")
    model = judge("gpu.model", None, {"gpu_model": "H100"})
    assert model["status"] == "FAIL"
    assert judge("gpu.count")["status"] == "SKIP" and judge("gpu.model")["status"] == "SKIP"
    assert judge("gpu.count", None, {"gpu_count": 8}, nvidia_smi=error("nvidia-smi -q -x timed out after 30s"))["status"] == "ERROR"


def test_gpu_model_names_the_wrong_gpus():
    def second_is_a40(root):
        gpus(2)(root)
        root.findall("gpu")[1].find("product_name").text = "NVIDIA A40"
    record = judge("gpu.model", smi("a100-sxm4-v12.xml", second_is_a40), {"gpu_model": "a100-sxm4"})
    assert record["status"] == "FAIL" and "1 of 2 GPUs are not a100-sxm4" in record["message"]
    assert named(record) == [(1, A100_UUID[:-4] + "0001")]
    assert judge("gpu.model", smi("a100-sxm4-v12.xml"), {"gpu_model": "A100"})["status"] == "PASS"


def test_kernel_module_version_mismatch_fails():
    module = ok({"version": "535.104.05", "source": "/proc/driver/nvidia/version", "open_module": False})
    record = judge("driver.kernel_module", smi("a100-sxm4-v12.xml"), kernel_module=module)
    assert record["status"] == "FAIL" and "kernel module 535.104.05 but user-space driver 535.54.03" in record["message"]
    assert "Reboot" in record["remediation"]
    same = ok({"version": "535.54.03", "source": "/proc/driver/nvidia/version", "open_module": False})
    assert judge("driver.kernel_module", smi("a100-sxm4-v12.xml"), kernel_module=same)["status"] == "PASS"
    broken = judge("driver.kernel_module", kernel_module=module, nvidia_smi=error(
        "nvidia-smi -q -x exited with rc 18: Failed to initialize NVML: Driver/library version mismatch"))
    assert broken["status"] == "FAIL" and "version mismatch" in broken["message"]
    assert judge("driver.kernel_module", smi("a100-sxm4-v12.xml"))["status"] == "SKIP"


@pytest.mark.parametrize("expect, status, fragment", [
    ({"driver_min": "535.104.05"}, "FAIL", "driver 535.54.03 is older than driver_min 535.104.05"),
    ({"driver_max": "530"}, "FAIL", "driver 535.54.03 is newer than driver_max 530"),
    ({"driver_min": "535.54.03", "driver_max": "535.54.03"}, "PASS", "within the expected range"),
    ({"driver_min": "535.9"}, "PASS", "within"),  # 54 > 9: numeric, not text comparison
    ({}, "PASS", "no driver_min/driver_max expected"),
    ({"driver_min": "latest"}, "ERROR", "expect.driver_min: 'latest' is not a dotted version"),
])
def test_driver_version_range(expect, status, fragment):
    record = judge("driver.version", smi("a100-sxm4-v12.xml"), expect)
    assert record["status"] == status and fragment in record["message"]


def test_cuda_driver_version():
    assert judge("cuda.driver_version", smi("a100-sxm4-v12.xml"))["message"] == "the driver supports CUDA up to 12.2"
    assert judge("cuda.driver_version", smi("a100-sxm4-v12.xml"), {"cuda_min": "12.4"})["status"] == "WARN"
    assert judge("cuda.driver_version", smi("rtx-3080-v13.xml"), {"cuda_min": "12.4"})["status"] == "PASS"


def pci_gpu(address, driver="nvidia"):
    return {"address": address, "device_id": "0x20b2", "class": "0x030200", "driver": driver}


def test_gpu_on_the_bus_the_driver_does_not_see():
    on_bus = ok({"gpus": [pci_gpu("0000:01:00.0"), pci_gpu("0000:41:00.0")], "nvswitches": []})
    record = judge("runtime.gpu_passthrough", smi("a100-sxm4-v12.xml"), nvidia_pci=on_bus)
    assert record["status"] == "FAIL" and record["message"].endswith("not seen by the driver: 0000:41:00.0")
    container = ok({"is_container": True, "is_vm": False, "is_wsl": False})
    record = judge("runtime.gpu_passthrough", smi("a100-sxm4-v12.xml"), nvidia_pci=on_bus, host=container)
    assert record["status"] == "PASS" and record["message"] == "container: 1 of the host's 2 GPUs are exposed to it"
    to_vm = ok({"gpus": [pci_gpu("0000:01:00.0"), pci_gpu("0000:41:00.0", "vfio-pci")], "nvswitches": []})
    record = judge("runtime.gpu_passthrough", smi("a100-sxm4-v12.xml"), nvidia_pci=to_vm)
    assert record["status"] == "PASS" and "1 bound to vfio-pci" in record["message"]


def test_nvidia_smi_check_fails_when_gpus_are_on_the_bus_without_it():
    on_bus = ok({"gpus": [pci_gpu("0000:01:00.0")], "nvswitches": []})
    record = judge("driver.nvidia_smi", nvidia_pci=on_bus)
    assert record["status"] == "FAIL" and "1 NVIDIA GPU(s) on the PCI bus (0000:01:00.0)" in record["message"]
    assert judge("driver.nvidia_smi")["status"] == "SKIP"
    assert judge("driver.nvidia_smi", nvidia_smi=error("nvidia-smi -q -x timed out after 30s"))["status"] == "ERROR"


def test_nvml_checks():
    data = smi("a100-sxm4-v12.xml")
    same = ok({"available": True, "error": None, "driver_version": "535.54.03", "device_count": 1,
               "devices": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "uuid": A100_UUID, "pci_bus_id": "00000000:01:00.0"}]})
    assert judge("gpu.nvml_available", data, nvml=same)["status"] == "PASS"
    assert judge("gpu.nvml_devices", data, nvml=same)["status"] == "PASS"
    assert judge("gpu.nvml_devices", data)["status"] == "SKIP"
    other = ok(dict(same["data"], devices=[dict(same["data"]["devices"][0], uuid="GPU-other")]))
    assert judge("gpu.nvml_devices", data, nvml=other)["status"] == "WARN"
    assert judge("gpu.nvml_available", data, nvml=absent("pynvml (nvidia-ml-py) is not installed"))["status"] == "SKIP"


SELECTED = ["driver.nvidia_smi", "gpu.count", "gpu.ecc_errors", "gpu.pcie_link"]


def doctor(path, **kwargs):
    kwargs.setdefault("only", SELECTED)
    return dict((c["id"], c) for c in _doctor.run(nvidia_smi_path=path, **kwargs)["checks"])


@pytest.mark.parametrize("body, fragment", [
    ("head -c 3000 '%s'" % fixture_path("nvidia-smi", "a10g.xml"), "nvidia-smi returned unparsable XML: "),
    ("echo 'this is not xml at all'", "nvidia-smi returned unparsable XML: syntax error"),
    ("exit 0", "nvidia-smi returned unparsable XML: empty output"),
    ("echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.' >&2; exit 9",
     "exited with rc 9: NVIDIA-SMI has failed"),
    ("exec sleep 30", "timed out after 1s"),
])
def test_broken_nvidia_smi_is_an_error_on_every_check_never_a_pass(tmp_path, body, fragment):
    checks = doctor(fake_nvidia_smi(tmp_path, body), timeouts={"nvidia_smi": 1})
    # driver.nvidia_smi is the root: ERROR with the reason; the other checks that read the probe are blocked by the
    # root (SKIP naming it, the reason kept in the message), never PASS.
    for check_id in SELECTED:
        expected = "ERROR" if check_id == "driver.nvidia_smi" else "SKIP"
        assert checks[check_id]["status"] == expected, check_id
        assert checks[check_id].get("blocked_by") == ("driver.nvidia_smi" if expected == "SKIP" else None), check_id
        assert fragment in checks[check_id]["message"], (check_id, checks[check_id]["message"])


def test_non_executable_nvidia_smi_path_is_a_permission_error(tmp_path):
    plain = tmp_path / "nvidia-smi"
    plain.write_text(read_fixture("nvidia-smi", "a10g.xml"))
    checks = doctor(str(plain))
    assert all(c["status"] == ("SKIP" if c.get("blocked_by") else "ERROR") and "permission denied" in c["message"]
               for c in checks.values())
    assert checks["driver.nvidia_smi"]["status"] == "ERROR"


def test_missing_nvidia_smi_skips_without_expectations_and_fails_with_them(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi, as on this machine
    checks = doctor(None)
    assert set(c["status"] for c in checks.values()) == {"SKIP"}
    checks = doctor(None, expect={"gpu_count": 8})
    assert checks["gpu.count"]["status"] == "FAIL" and checks["gpu.ecc_errors"]["status"] == "SKIP"

"""doctor's environment on an AMD host: the AMD inventory's GPUs, amdgpu driver and ROCm release, vendor-tagged."""

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import rocm_version
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.amd_smi import parse_amd_smi
from ansible_collections.continuum.hydra.tests.support.amd import MI210_STATIC, metric_text
from ansible_collections.continuum.hydra.tests.support.doctor_probes import probe_table


def test_environment_of_an_amd_host_names_its_gpus_driver_and_rocm(monkeypatch):
    inventory = parse_amd_smi(MI210_STATIC, metric_text())
    inventory["driver_version"], inventory["driver_kind"] = "6.10.5", "dkms"
    monkeypatch.setattr(rocm_version, "read_rocm_version", lambda root="/": "6.4.1-120")
    env = _doctor.run(only=["gpu.count"], probes=probe_table(amd_smi=lambda options: inventory))["environment"]
    assert (env["gpu_vendor"], env["driver_version"], env["amdgpu_driver_kind"], env["rocm_version"]) == (
        "amd", "6.10.5", "dkms", "6.4.1-120")
    assert env["cuda_driver_version"] is None
    (gpu,) = env["gpus"]
    assert (gpu["vendor"], gpu["name"], gpu["driver_version"], gpu["memory_total_mib"]) == (
        "amd", "AMD Instinct MI210", "6.10.5", 8176)  # the metric recording is an RX 6600's: its mem_usage wins
    assert gpu["vbios_version"] and gpu["pcie_width_max"] == 16 and gpu["persistence_mode"] is None


def test_rocm_version_is_the_first_line_of_its_info_file(tmp_path):
    assert rocm_version.read_rocm_version(str(tmp_path)) is None
    (tmp_path / "opt/rocm/.info").mkdir(parents=True)
    (tmp_path / "opt/rocm/.info/version").write_text("6.2.4-120\n")
    assert rocm_version.read_rocm_version(str(tmp_path)) == "6.2.4-120"

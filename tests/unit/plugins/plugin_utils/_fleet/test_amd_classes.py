"""Fleet classes, drift and findings with AMD hosts: vendor in the class, amdgpu / ROCm / VBIOS drift, amd-smi advice.

The AMD environments are what doctor's run.environment() builds from an AMD inventory (see
tests/unit/plugins/module_utils/_doctor/test_run_amd.py, which builds one from recorded amd-smi output).
"""

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import findings
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.classes import classify, count_peer_groups
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.drift import analyse_drift
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.facts import host_facts

GIB = 1024 ** 3
CPU = "AMD EPYC 9654 96-Core Processor"


def amd_entry(name="AMD Instinct MI300X", count=8, driver="6.10.5", rocm="6.4.1-120", vbios="113-M3000100-102"):
    gpus = [{"index": i, "uuid": "gpu-%d" % i, "name": name, "vendor": "amd", "vbios_version": vbios, "driver_version": driver,
             "pcie_gen_max": 5, "pcie_width_max": 16} for i in range(count)]
    return {"doctor": {"environment": {"cpu_model": CPU, "memory_total_bytes": 1510 * GIB, "kernel": "6.8.0-60-generic",
                                       "gpu_vendor": "amd", "driver_version": driver, "amdgpu_driver_kind": "dkms",
                                       "rocm_version": rocm, "gpus": gpus}, "checks": [], "probes": {}}}


def nvidia_entry(name="NVIDIA H100 80GB HBM3", count=8):
    gpus = [{"index": i, "uuid": "GPU-%d" % i, "name": name, "vbios_version": "96.00.99.00.01", "driver_version": "570.133.20",
             "persistence_mode": "Enabled", "pcie_gen_max": 5, "pcie_width_max": 16} for i in range(count)]
    return {"doctor": {"environment": {"cpu_model": CPU, "memory_total_bytes": 1510 * GIB, "kernel": "6.8.0-60-generic",
                                       "driver_version": "570.133.20", "cuda_driver_version": "12.8", "gpus": gpus},
                       "checks": [], "probes": {}}}


def classes_of(entries):
    facts = dict((host, host_facts(entry)) for host, entry in entries.items())
    host_class, classes = classify(facts)
    return facts, host_class, classes


def test_an_amd_and_an_nvidia_host_of_the_same_shape_get_two_classes_with_the_vendor():
    facts, host_class, classes = classes_of({"mi300x-1": amd_entry(), "h100-1": nvidia_entry()})
    assert facts["mi300x-1"]["gpu_vendor"] == "amd" and facts["h100-1"]["gpu_vendor"] == "nvidia"
    assert host_class["mi300x-1"] == "8x AMD Instinct MI300X | %s | 1536 GiB" % CPU
    # NVIDIA class names are what they were before vendors were told apart.
    assert host_class["h100-1"] == "8x NVIDIA H100 80GB HBM3 | %s | 1536 GiB" % CPU
    assert classes[host_class["mi300x-1"]]["gpu_vendor"] == "amd" and classes[host_class["h100-1"]]["gpu_vendor"] == "nvidia"


def test_an_amd_gpu_name_without_the_vendor_word_gets_it():
    facts, host_class, classes = classes_of({"sysfs-host": amd_entry(name="Aqua Vanjaram [Instinct MI300X]", count=1)})
    assert host_class["sysfs-host"].startswith("1x AMD Aqua Vanjaram [Instinct MI300X] | ")
    assert classes[host_class["sysfs-host"]]["gpu_model"] == "Aqua Vanjaram [Instinct MI300X]"


def test_amdgpu_rocm_and_vbios_drift_within_an_amd_class():
    entries = {"mi300x-%d" % n: amd_entry() for n in range(1, 5)}
    entries["mi300x-3"] = amd_entry(rocm="6.2.0-66")
    entries["mi300x-4"] = amd_entry(driver="6.8.5", vbios="113-M3000100-100")
    entries["h100-1"] = nvidia_entry()
    facts, host_class, _classes = classes_of(entries)
    drift = analyse_drift(facts, host_class, count_peer_groups(facts, host_class, _classes))
    found = sorted((item["host"], item["field"], item["value"], item["reference"]) for item in drift["items"])
    assert found == [("mi300x-3", "rocm_version", "6.2.0-66", "6.4.1-120"),
                     ("mi300x-4", "driver_version", "6.8.5", "6.10.5"),
                     ("mi300x-4", "vbios_version", "113-M3000100-100", "113-M3000100-102")]
    assert [g["index"] for g in next(i for i in drift["items"] if i["field"] == "vbios_version")["gpus"]] == list(range(8))
    # The NVIDIA host is judged in its own class: no AMD value is ever its reference.
    assert "h100-1" not in drift["hosts"] and "rocm_version" in drift["fields"]


def test_an_amd_gpu_fault_escalates_with_the_amd_smi_reset():
    report = {"generated_at": "2026-11-24T10:00:00+00:00", "hosts": {"mi300x-1": {"doctor": {
        "environment": {"boot_id": "b1"},
        "checks": [{"id": "gpu.ecc_errors", "status": "FAIL", "message": "GPU 3: uncorrectable",
                    "details": {"gpus": [{"index": 3, "uuid": "gpu-3", "name": "AMD Instinct MI300X", "vendor": "amd"}]}}]}},
        "h100-1": {"doctor": {"environment": {"boot_id": "b2"}, "checks": [{
            "id": "gpu.ecc_errors", "status": "FAIL", "message": "GPU 1: uncorrectable",
            "details": {"gpus": [{"index": 1, "uuid": "GPU-1", "name": "NVIDIA H100 80GB HBM3"}]}}]}}}}
    state = findings.update(findings.empty_state(), report)
    by_host = dict((f["host"], f) for f in state["findings"])
    amd, nvidia = findings.escalation(by_host["mi300x-1"]), findings.escalation(by_host["h100-1"])
    assert amd["level"] == nvidia["level"] == 1
    assert "amd-smi reset --gpureset --gpu <index>" in amd["action"] and "nvidia-smi" not in amd["action"]
    assert "nvidia-smi -r -i <index>" in nvidia["action"] and "gpu_vendor" not in by_host["h100-1"]

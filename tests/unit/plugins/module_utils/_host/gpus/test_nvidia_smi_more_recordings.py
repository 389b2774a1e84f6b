"""The nvidia-smi readers on the older-driver, MIG, vGPU and multi-GPU recordings and the datacenter ``--query-gpu``
captures (tests/fixtures/nvidia-smi/README.md "More recordings", tests/fixtures/nvidia-smi-query/README.md): the values a
person reading each file sees, read from it."""

import xml.etree.ElementTree as ET

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host import telemetry
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import Unreadable, csv_fields, parse_nvidia_smi
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

NO_ECC = {"correctable": None, "uncorrectable": None, "dram_correctable": None, "dram_uncorrectable": None,
          "sram_correctable": None, "sram_uncorrectable": None}
ZERO_ECC = dict((key, 0) for key in NO_ECC)
QUIET = {"gpu_idle": False, "applications_clocks_setting": False, "sw_power_cap": False, "hw_slowdown": False,
         "hw_thermal_slowdown": False, "hw_power_brake_slowdown": False, "sync_boost": False, "sw_thermal_slowdown": False,
         "display_clocks_setting": False}


def parsed(name, *edits):
    """The recording, after edits: (element path below the first <gpu>, text) pairs or callables taking the root."""
    text = read_fixture("nvidia-smi", name)
    if edits:
        root = ET.fromstring(text)
        for edit in edits:
            if callable(edit):
                edit(root)
            else:
                node = root.find("gpu/" + edit[0])
                assert node is not None, edit[0]
                node.text = edit[1]
        text = ET.tostring(root, encoding="unicode")
    return parse_nvidia_smi(text)


def test_v100_pcie_driver_460_pre_ampere_ecc_layout_and_retired_pages():
    data = parsed("tesla-v100-pcie-32gb-v11.xml")
    assert (data["driver_version"], data["cuda_version"], data["attached_gpus"], data["unreadable"]) == ("460.39", "11.2", 1, {})
    (gpu,) = data["gpus"]
    assert (gpu["name"], gpu["brand"], gpu["uuid"], gpu["pci_bus_id"]) == (
        "Tesla V100-PCIE-32GB", "Tesla", "GPU-e77ce5d8-8b63-c936-3c1b-839d45bcd0f2", "00000000:21:01.0")
    assert gpu["architecture"] is None  # DTD v11 under driver 460 writes no <product_architecture>
    assert (gpu["virtualization_mode"], gpu["persistence_mode"], gpu["performance_state"]) == ("Pass-Through", "Disabled", "P0")
    # single_bit/double_bit counts per location: every one 0, ECC on.
    assert (gpu["ecc"]["current"], gpu["ecc"]["pending"]) == ("Enabled", "Enabled")
    assert gpu["ecc"]["volatile"] == ZERO_ECC and gpu["ecc"]["aggregate"] == ZERO_ECC
    assert gpu["retired_pages"] == {"single_bit": 0, "double_bit": 0, "pending": False}
    assert gpu["remapped_rows"] is None and gpu["mig"] == {"current": None, "pending": None, "instances": 0}
    assert gpu["utilization"] == {"gpu_pct": 91, "memory_pct": 47}
    assert gpu["memory"] == {"total_mib": 32510, "used_mib": 12311}
    assert gpu["temperature"]["gpu_c"] == 66 and gpu["temperature"]["memory_c"] == 65
    assert (gpu["temperature"]["shutdown_c"], gpu["temperature"]["slowdown_c"], gpu["temperature"]["max_operating_c"],
            gpu["temperature"]["memory_max_c"]) == (90, 87, 83, 85)
    assert gpu["power"] == {"draw_w": 170.16, "limit_w": 250.0, "default_limit_w": 250.0, "min_limit_w": 100.0,
                            "max_limit_w": 250.0}
    assert gpu["clocks"] == {"graphics_mhz": 1380, "sm_mhz": 1380, "memory_mhz": 877} == gpu["max_clocks"]
    assert gpu["applications_clocks"] == {"graphics_mhz": 1230, "sm_mhz": None, "memory_mhz": 877}
    assert gpu["pcie"] == {"gen_current": 3, "gen_max": 3, "gen_device_max": None, "gen_host_max": None,
                           "width_current": 16, "width_max": 16, "replay_counter": 0, "replay_rollover_counter": 0}
    assert gpu["clock_event_reasons"] == QUIET
    assert gpu["recovery"] == {"action": None, "reset_required": None, "drain_and_reset_recommended": None}


def test_eight_v100s_busy_host_every_gpu_its_own_values():
    data = parsed("tesla-v100s-pcie-32gb-x8-v11.xml")
    assert (data["driver_version"], data["cuda_version"], data["attached_gpus"]) == ("460.73.01", "11.2", 8)
    gpus = data["gpus"]
    assert [g["index"] for g in gpus] == list(range(8)) and {g["name"] for g in gpus} == {"Tesla V100S-PCIE-32GB"}
    assert [g["pci_bus_id"][-7:] for g in gpus] == ["00:0D.0", "00:0E.0", "00:0F.0", "00:10.0", "00:11.0", "00:12.0",
                                                    "00:13.0", "00:14.0"]
    assert len({g["uuid"] for g in gpus}) == 8 and gpus[0]["uuid"] == "GPU-76098dc1-d3bc-9a1b-7ea6-f7b48837829e"
    # What datakit's own test expects of this file, GPU by GPU (utilisation, SM clock, power, temperature).
    assert [g["utilization"]["gpu_pct"] for g in gpus] == [97, 75, 80, 23, 98, 98, 91, 99]
    assert [g["clocks"]["sm_mhz"] for g in gpus] == [1410, 1432, 1590, 1432, 1342, 1590, 1597, 1575]
    assert [g["power"]["draw_w"] for g in gpus] == [232.8, 152.03, 67.57, 198.41, 117.99, 85.8, 68.14, 61.47]
    assert [g["temperature"]["gpu_c"] for g in gpus] == [66, 58, 57, 61, 59, 64, 61, 57]
    assert {g["max_clocks"]["sm_mhz"] for g in gpus} == {1597} and {g["power"]["limit_w"] for g in gpus} == {250.0}
    assert all(g["ecc"]["volatile"] == ZERO_ECC and g["retired_pages"]["pending"] is False for g in gpus)
    assert all(g["unreadable"] == {} for g in gpus)


def test_a100_mig_on_driver_510_two_instances_and_per_instance_volatile_ecc():
    data = parsed("a100-sxm4-40gb-mig-v11.xml")
    (gpu,) = data["gpus"]
    assert (data["driver_version"], gpu["name"], gpu["architecture"]) == ("510.47.03", "NVIDIA A100-SXM4-40GB", "Ampere")
    assert gpu["mig"] == {"current": "Enabled", "pending": "Enabled", "instances": 2}
    assert gpu["utilization"] == {"gpu_pct": None, "memory_pct": None}  # N/A with MIG on
    assert gpu["remapped_rows"] is None and gpu["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}
    # Driver 510 writes the GPU's own volatile counters N/A with MIG on and counts SRAM uncorrectable errors per MIG
    # device (<mig_device><ecc_error_count><volatile_count>): 0 + 0 here, read as the GPU's volatile count.
    volatile = gpu["ecc"]["volatile"]
    assert (volatile["sram_uncorrectable"], volatile["uncorrectable"]) == (0, 0)
    assert volatile["correctable"] is None and volatile["dram_uncorrectable"] is None
    assert gpu["ecc"]["aggregate"] == ZERO_ECC
    assert gpu["power"]["draw_w"] == 66.92 and gpu["power"]["limit_w"] == 400.0
    assert gpu["temperature"]["gpu_c"] == 36 and gpu["temperature"]["memory_c"] == 44
    assert gpu["applications_clocks"]["graphics_mhz"] == 1095 and gpu["max_clocks"]["sm_mhz"] == 1410
    assert gpu["pcie"]["gen_current"] == gpu["pcie"]["gen_max"] == 4 and gpu["pcie"]["width_current"] == 16
    assert gpu["clock_event_reasons"] == QUIET  # one reason's text spans two lines in the file


def _mig_device_count(index, text):
    def edit(root):
        devices = root.findall("gpu/mig_devices/mig_device")
        devices[index].find("ecc_error_count/volatile_count/sram_uncorrectable").text = text
    return edit


def test_an_uncorrectable_error_counted_on_one_mig_instance_is_the_gpus_volatile_count():
    # Failed before: the per-instance counts were not read, so the GPU's volatile count stayed None (N/A).
    volatile = parsed("a100-sxm4-40gb-mig-v11.xml", _mig_device_count(1, "2"))["gpus"][0]["ecc"]["volatile"]
    assert (volatile["sram_uncorrectable"], volatile["uncorrectable"]) == (2, 2)
    gpu = parsed("a100-sxm4-40gb-mig-v11.xml", _mig_device_count(0, "Unknown Error"))["gpus"][0]
    assert gpu["ecc"]["volatile"]["sram_uncorrectable"] is None
    assert gpu["unreadable"] == {"ecc.volatile.sram_uncorrectable": "Unknown Error", "ecc.volatile.uncorrectable": "Unknown Error"}


def test_mig_instance_counts_do_not_replace_the_gpus_own_volatile_count():
    # Driver 535 (a100-sxm4-v12.xml) writes both: the GPU's own count is the one read.
    def edit(root):
        for device in root.findall("gpu/mig_devices/mig_device"):
            device.find("ecc_error_count/volatile_count/sram_uncorrectable").text = "5"
    volatile = parsed("a100-sxm4-v12.xml", edit)["gpus"][0]["ecc"]["volatile"]
    assert (volatile["sram_uncorrectable"], volatile["uncorrectable"]) == (0, 0)


def test_p100_driver_510_lifetime_correctable_count_in_device_memory():
    (gpu,) = parsed("tesla-p100-pcie-16gb-v11.xml")["gpus"]
    identity = ("Tesla P100-PCIE-16GB", "Pascal", "GPU-d3da8716-eaab-75db-efc1-60e88e1cd55e")
    assert (gpu["name"], gpu["architecture"], gpu["uuid"]) == identity
    assert gpu["ecc"]["volatile"] == ZERO_ECC
    assert gpu["ecc"]["aggregate"] == dict(ZERO_ECC, correctable=3, dram_correctable=3)  # <single_bit><device_memory>3
    assert gpu["retired_pages"] == {"single_bit": 0, "double_bit": 0, "pending": False}
    assert gpu["temperature"]["gpu_c"] == 38 and gpu["temperature"]["max_operating_c"] is None
    assert (gpu["temperature"]["shutdown_c"], gpu["temperature"]["slowdown_c"]) == (85, 82)
    assert gpu["power"] == {"draw_w": 26.16, "limit_w": 250.0, "default_limit_w": 250.0, "min_limit_w": 125.0,
                            "max_limit_w": 250.0}
    assert gpu["clock_event_reasons"] == dict(QUIET, gpu_idle=True) and gpu["clocks"]["sm_mhz"] == 405


def test_quadro_driver_418_without_doctype():
    data = parsed("quadro-p400-418.xml")
    (gpu,) = data["gpus"]
    assert (data["driver_version"], data["cuda_version"], gpu["name"], gpu["brand"]) == ("418.43", "10.1", "Quadro P400", "Quadro")
    assert gpu["architecture"] is None and gpu["virtualization_mode"] == "None"
    assert (gpu["pcie"]["gen_current"], gpu["pcie"]["gen_max"], gpu["pcie"]["width_current"]) == (1, 3, 16)
    assert gpu["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}  # <pending_retirement>N/A only
    assert gpu["ecc"]["volatile"] == NO_ECC and set(gpu["power"].values()) == {None}
    assert (gpu["temperature"]["gpu_c"], gpu["temperature"]["shutdown_c"], gpu["temperature"]["slowdown_c"]) == (33, 103, 100)
    assert gpu["clocks"]["sm_mhz"] == 139 and gpu["max_clocks"] == {"graphics_mhz": 1252, "sm_mhz": 1252, "memory_mhz": 2005}
    assert gpu["clock_event_reasons"] == dict(QUIET, gpu_idle=True) and gpu["unreadable"] == {}


def test_vgpu_guest_on_windows_placeholders_and_absent_values():
    data = parsed("grid-p4-1q-vgpu-v11.xml")
    (gpu,) = data["gpus"]
    assert (data["driver_version"], gpu["name"], gpu["brand"]) == ("513.46", "GRID P4-1Q", "NVIDIA RTX Virtual Workstation")
    assert gpu["virtualization_mode"] == "VGPU" and gpu["serial"] is None and gpu["persistence_mode"] is None
    # The guest's placeholders: 0 C and 0 MHz, a maximum clock of 0 MHz; the rest N/A.
    assert gpu["temperature"]["gpu_c"] == 0 and gpu["clocks"] == gpu["max_clocks"] == {"graphics_mhz": 0, "sm_mhz": 0,
                                                                                       "memory_mhz": 0}
    assert gpu["clock_event_reasons"] == {}  # <clocks_throttle_reasons>N/A</clocks_throttle_reasons>
    assert set(gpu["pcie"].values()) == {None} and set(gpu["power"].values()) == {None}
    assert gpu["ecc"]["volatile"] == NO_ECC and gpu["memory"] == {"total_mib": 1024, "used_mib": 807}
    assert gpu["unreadable"] == {}


# Drivers 580+ (and 595 on GeForce) write their HBM channel and TPC repair state beside the ECC counters
# (nvmlDeviceGetRepairStatus, nvmlDeviceGetUnrepairableMemoryFlag_v1).
@pytest.mark.parametrize("name, repair", [
    ("qx-gb200.xml", {"channel_pending": False, "tpc_pending": False, "unrepairable_memory": False}),
    ("qx-b200.xml", {"channel_pending": False, "tpc_pending": False, "unrepairable_memory": None}),
    ("qx-h100.xml", {"channel_pending": False, "tpc_pending": False, "unrepairable_memory": None}),
    ("rtx-3080-v13.xml", {"channel_pending": False, "tpc_pending": False, "unrepairable_memory": None}),
    ("a100-sxm4-v12.xml", {"channel_pending": None, "tpc_pending": None, "unrepairable_memory": None}),
])
def test_repair_status_is_read(name, repair):
    # Failed before: <channel_repair_pending>, <tpc_repair_pending> and <unrepairable_memory> were not read.
    text = read_fixture("k8s-test-infra" if name.startswith("qx-") else "nvidia-smi", name)
    gpus = parse_nvidia_smi(text)["gpus"]
    assert [gpu["repair"] for gpu in gpus] == [repair] * len(gpus)
    planted = parse_nvidia_smi(text.replace("<tpc_repair_pending>No", "<tpc_repair_pending>Unknown Error", 1))["gpus"][0]
    if repair["tpc_pending"] is not None:
        assert planted["repair"]["tpc_pending"] is None and planted["unreadable"] == {"repair.tpc_pending": "Unknown Error"}


def _capture(name):
    lines = read_fixture("nvidia-smi-query", name).splitlines()
    return telemetry.parse_smi_header(lines[0]), lines[1:]


@pytest.mark.parametrize("name, fields, idle, load", [
    # (pci bus id, util %, memory used MiB, power W, temperature C, SM MHz, memory MHz, max SM MHz, throttle mask,
    #  PCIe gen, gen max, width, width max) of the idle and the loaded sample.
    ("h100-80gb-hbm3-590.48.01.csv", 212, ("00000000:00:09.0", 0.0, 0.0, 69.85, 41.0, 345.0, 2619.0, 1980.0, 1, 5, 5, 16, 16),
     ("00000000:00:09.0", 100.0, 19818.0, 631.95, 59.0, 1980.0, 2619.0, 1980.0, 0, 5, 5, 16, 16)),
    ("h100-80gb-hbm3-mig-590.48.01.csv", 212, ("00000000:00:09.0", None, 59.0, 71.15, 42.0, 345.0, 2619.0, 1980.0, 1, 5, 5, 16, 16),
     ("00000000:00:09.0", None, 11125.0, 433.78, 53.0, 1980.0, 2619.0, 1980.0, 0, 5, 5, 16, 16)),
    ("h200-590.48.01.csv", 212, ("00000000:83:00.0", 0.0, 0.0, 77.71, 28.0, 345.0, 3201.0, 1980.0, 1, 5, 5, 16, 16),
     ("00000000:83:00.0", 100.0, 32362.0, 627.4, 52.0, 1980.0, 3201.0, 1980.0, 0, 5, 5, 16, 16)),
    ("h200-mig-590.48.01.csv", 212, ("00000000:83:00.0", None, 55.0, 78.28, 28.0, 345.0, 3201.0, 1980.0, 1, 5, 5, 16, 16),
     ("00000000:83:00.0", None, 16959.0, 295.01, 36.0, 1980.0, 3201.0, 1980.0, 0, 5, 5, 16, 16)),
    ("l40s-595.80.csv", 202, ("00000000:01:00.0", 100.0, 0.0, 144.97, 63.0, 2520.0, 9001.0, 2520.0, 0, 4, 4, 16, 16),
     ("00000000:01:00.0", 9.0, 1235.0, 110.23, 54.0, 2520.0, 9001.0, 2520.0, 0, 4, 4, 16, 16)),
])
def test_datacenter_query_gpu_captures_read_by_the_sampler(name, fields, idle, load):
    columns, rows = _capture(name)
    assert len(columns) == fields and len(rows) == 2
    keys = ("pci_bus_id", "util_pct", "memory_used_mib", "power_w", "temperature_c", "sm_clock_mhz", "mem_clock_mhz",
            "sm_clock_max_mhz", "throttle_mask", "pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max")
    for line, expected in zip(rows, (idle, load)):
        values = csv_fields(line)
        assert len(values) == fields and not [v for v in values if isinstance(v, Unreadable)]
        row = telemetry.parse_smi_row(columns, line)
        assert tuple(row[key] for key in keys) == expected and row["index"] == 0


def test_query_gpu_capture_values_a_person_reads_in_it():
    columns, rows = _capture("h100-80gb-hbm3-mig-590.48.01.csv")
    loaded = dict(zip(columns, csv_fields(rows[1])))
    assert (loaded["name"], loaded["driver_version"], loaded["mig.mode.current"]) == ("NVIDIA H100 80GB HBM3", "590.48.01", "Enabled")
    assert loaded["ecc.errors.uncorrected.volatile.total"] == "0" and loaded["utilization.gpu"] is None  # [N/A] under MIG
    # MIG on: the row counts are [N/A] while the bank histogram is reported.
    assert loaded["remapped_rows.pending"] is None and loaded["remapped_rows.histogram.max"] == "2560"
    assert loaded["clocks.applications.graphics"] is None  # [Requested functionality has been deprecated]
    columns, rows = _capture("l40s-595.80.csv")
    loaded = dict(zip(columns, csv_fields(rows[1])))
    assert (loaded["remapped_rows.uncorrectable_inactive"], loaded["remapped_rows.failure"]) == ("0", "No")
    assert loaded["persistence_mode"] == "Disabled" and loaded["power.draw.instant"] == "112.38 W"


def test_p100_query_without_units_and_an_na_fan():
    columns, rows = _capture("tesla-p100-pcie-16gb.csv")
    assert len(rows) == 1
    values = dict(zip(columns, csv_fields(rows[0])))
    assert values["name"] == "Tesla P100-PCIE-16GB" and values["fan.speed"] is None  # [N/A]
    row = telemetry.parse_smi_row(columns, rows[0])
    assert (row["util_pct"], row["memory_used_mib"], row["power_w"], row["temperature_c"], row["sm_clock_mhz"],
            row["mem_clock_mhz"], row["throttle_mask"]) == (0.0, 0.0, 28.16, 37.0, 405.0, 715.0, None)

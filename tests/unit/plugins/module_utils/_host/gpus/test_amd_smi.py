"""amd-smi JSON -> GPU records, on recorded amd-smi output (tests/fixtures/amd/README.md) in both shapes."""

import copy
import json

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import amd_smi
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.amd_smi import AmdSmiParseError, parse_amd_smi
from ansible_collections.continuum.hydra.tests.support.amd import MI210_STATIC, metric_text, rx6600_metric, rx6600_static, with_ecc


def test_mi210_static_and_a_24x_metric_list_give_one_full_record():
    inventory = parse_amd_smi(MI210_STATIC, metric_text())
    assert (inventory["vendor"], inventory["source"]) == ("amd", "amd-smi")
    # In-box driver: amd-smi reports the kernel banner with spaces stripped, not a driver version.
    assert (inventory["driver_version"], inventory["driver_kind"], inventory["kernel_release"]) == (
        None, "in-box", "6.14.0-24-generic")
    (gpu,) = inventory["gpus"]
    assert gpu["vendor"] == "amd" and gpu["name"] == "AMD Instinct MI210" and gpu["architecture"] == "gfx90a"
    assert gpu["temperature"]["sensor"] == "hotspot"
    assert (gpu["temperature"]["gpu_c"], gpu["temperature"]["slowdown_c"], gpu["temperature"]["shutdown_c"]) == (37, 100, 105)
    assert (gpu["temperature"]["edge_c"], gpu["temperature"]["memory_c"], gpu["temperature"]["memory_max_c"]) == (36, 32, 94)
    assert gpu["power"] == {"draw_w": 6, "limit_w": 300, "default_limit_w": None, "min_limit_w": 0, "max_limit_w": 300}
    assert (gpu["pcie"]["width_current"], gpu["pcie"]["width_max"], gpu["pcie"]["gen_current"], gpu["pcie"]["gen_max"]) == (8, 16, 4, 4)
    # "N/A" is absent, never a zero and never unreadable.
    assert gpu["pcie"]["replay_counter"] is None and gpu["unreadable"] == {}
    assert gpu["bad_pages"]["threshold"] == 655 and gpu["ecc"]["current"] == "Enabled"
    assert gpu["ecc"]["volatile"]["uncorrectable"] == 0
    assert (gpu["clocks"]["sm_mhz"], gpu["max_clocks"]["sm_mhz"], gpu["clocks"]["memory_mhz"]) == (800, 2750, 541)
    assert gpu["clock_event_reasons"] == {"throttled": False}
    assert gpu["memory"] == {"total_mib": 8176, "used_mib": 202}
    json.dumps(inventory, allow_nan=False)


def test_the_wrapped_shape_and_the_bare_list_read_the_same():
    assert parse_amd_smi(MI210_STATIC, metric_text(wrapped=True)) == parse_amd_smi(MI210_STATIC, metric_text())


def test_warnings_printed_before_the_json_are_skipped():
    noisy = "WARNING: AMD GPU device(s) is/are in a low-power state. Check power control/runtime_status\n\n" + metric_text()
    assert parse_amd_smi(MI210_STATIC, noisy)["gpus"][0]["power"]["draw_w"] == 6


def test_a_planted_uncorrectable_count_is_in_the_record():
    gpu = parse_amd_smi(MI210_STATIC, with_ecc(uncorrectable=3, umc_uncorrectable=3))["gpus"][0]
    assert gpu["ecc"]["volatile"]["uncorrectable"] == 3 and gpu["ecc"]["volatile"]["dram_uncorrectable"] == 3
    assert gpu["ras_blocks"]["UMC"] == {"enabled": True, "correctable": 0, "uncorrectable": 3, "deferred": 0}
    # XGMI_WAFL is DISABLED in the MI210 recording: its block is marked so.
    assert gpu["ras_blocks"]["XGMI_WAFL"]["enabled"] is False


def test_ecc_counts_of_a_gpu_without_enabled_ecc_are_not_judged():
    static = json.loads(MI210_STATIC)
    static["gpu_data"][0]["ras"] = "N/A"  # Radeon boards: no RAS section
    gpu = parse_amd_smi(json.dumps(static), with_ecc(uncorrectable=4194240))["gpus"][0]
    assert gpu["ecc"]["volatile"]["uncorrectable"] is None and gpu["ecc"]["current"] is None


@pytest.mark.parametrize("value, shown", [
    ("AMDSMI_STATUS_NO_PERM", "AMDSMI_STATUS_NO_PERM"),
    ("hot", "hot"),
    ({"value": "1e999", "unit": "C"}, "value out of range"),
])
def test_garbage_where_a_number_belongs_is_unreadable_not_absent(value, shown):
    doc = rx6600_metric()
    doc[0]["temperature"]["hotspot"] = value
    gpu = parse_amd_smi(MI210_STATIC, metric_text(doc))["gpus"][0]
    assert shown in gpu["unreadable"]["temperature.hotspot_c"]
    # The edge sensor is judged instead, against the edge limits.
    assert (gpu["temperature"]["sensor"], gpu["temperature"]["gpu_c"], gpu["temperature"]["slowdown_c"]) == ("edge", 36, 99)


@pytest.mark.parametrize("text, words", [
    ("", "empty output"),
    ("amd-smi: command not found", "no JSON"),
    ("[{\"gpu\": 0, ", "amd-smi metric"),
    ("{\"error\": 1}", "expected a list of GPU objects"),
    ("[{\"gpu\": \"zero\"}]", "is not a number"),
])
def test_bad_output_is_one_clear_error(text, words):
    with pytest.raises(AmdSmiParseError, match=words):
        parse_amd_smi(MI210_STATIC, text)


def test_list_gives_addresses_and_partitions_and_a_broken_list_is_a_problem_not_a_failure():
    listing = json.dumps([{"gpu": 0, "bdf": "0000:83:00.0", "uuid": "8cff73bf-0000-1000-80b6-e1b5b5a08d0f",
                           "kfd_id": 17592, "node_id": 2, "partition_id": 0}])
    gpu = parse_amd_smi(MI210_STATIC, metric_text(), listing)["gpus"][0]
    assert gpu["pci_bus_id"] == "0000:83:00.0" and gpu["partition"]["id"] == 0
    inventory = parse_amd_smi(MI210_STATIC, metric_text(), "garbage")
    assert inventory["gpus"][0]["pci_bus_id"] is None and "amd-smi list" in inventory["problems"][0]


def test_a_gpu_in_one_document_only_still_gets_a_record():
    doc = rx6600_metric()
    second = copy.deepcopy(doc[0])
    second["gpu"] = 1
    inventory = parse_amd_smi(MI210_STATIC, metric_text(doc + [second]))
    assert [g["index"] for g in inventory["gpus"]] == [0, 1]
    # No static data for GPU 1: no limits, a generic name, never a crash.
    assert inventory["gpus"][1]["temperature"]["slowdown_c"] is None and inventory["gpus"][1]["name"].startswith("AMD GPU")


@pytest.mark.parametrize("raw, expected", [
    ("6.10.5", ("6.10.5", "dkms", None)),
    ("Linuxversion6.14.0-24-generic(buildd@lcy02-amd64-010)(x86_64-linux-gnu-gcc-13", (None, "in-box", "6.14.0-24-generic")),
    ("7.0.0-3-pve", (None, "in-box", "7.0.0-3-pve")),
    ("N/A", (None, None, None)),
])
def test_driver_identity(raw, expected):
    assert amd_smi.driver_identity(raw) == expected


def test_a_lone_gpu_object_and_a_listed_ecc_block_state_read_too():
    static = json.loads(MI210_STATIC)["gpu_data"][0]
    static["ras"]["ecc_block_state"] = [{"block": "UMC", "status": "ENABLED"}, {"block": "XGMI_WAFL", "status": "DISABLED"}]
    gpu = parse_amd_smi(json.dumps(static), with_ecc(uncorrectable=1, umc_uncorrectable=1))["gpus"][0]
    assert gpu["ecc"]["volatile"]["uncorrectable"] == 1 and gpu["ras_blocks"]["XGMI_WAFL"]["enabled"] is False


def test_the_rx6600_static_and_metric_pair():
    inventory = parse_amd_smi(json.dumps(rx6600_static()), metric_text())
    assert (inventory["driver_version"], inventory["driver_kind"], inventory["kernel_release"]) == (None, "in-box", "7.0.0-3-pve")
    (gpu,) = inventory["gpus"]
    assert gpu["pci_bus_id"] == "0000:0b:00.0" and gpu["name"] == "Navi 23 [Radeon RX 6600/6600 XT"
    assert gpu["vbios_version"] == "020.003.000.030.000000"
    assert (gpu["temperature"]["slowdown_c"], gpu["temperature"]["shutdown_c"], gpu["temperature"]["memory_max_c"]) == (110, 115, 100)
    assert gpu["power"] == {"draw_w": 6, "limit_w": 100, "default_limit_w": None, "min_limit_w": 94, "max_limit_w": 100}
    # No RAS on a Radeon: ECC not judged; partitions "N/A": absent.
    assert gpu["ecc"]["current"] is None and gpu["ecc"]["volatile"]["uncorrectable"] is None
    assert gpu["partition"] == {"compute": None, "memory": None, "id": None} and gpu["unreadable"] == {}


def test_newer_limit_spellings_ppt0_and_mem_temperatures():
    static = rx6600_static()
    limit = static[0]["limit"]
    for kind in ("slowdown", "shutdown"):
        limit["%s_mem_temperature" % kind] = limit.pop("%s_vram_temperature" % kind)
    limit["ppt0"] = {"socket_power_limit": {"value": 750, "unit": "W"}, "max_power_limit": {"value": 750, "unit": "W"},
                     "min_power_limit": {"value": 0, "unit": "W"}}
    for key in ("max_power", "min_power", "socket_power"):
        del limit[key]
    gpu = parse_amd_smi(json.dumps(static), metric_text())["gpus"][0]
    assert gpu["temperature"]["memory_max_c"] == 100
    assert (gpu["power"]["limit_w"], gpu["power"]["max_limit_w"], gpu["power"]["min_limit_w"]) == (750, 750, 0)

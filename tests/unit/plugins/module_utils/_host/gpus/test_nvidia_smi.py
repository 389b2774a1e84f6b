"""The nvidia-smi parsers on every recorded output: the values the GPU checks judge, read from the files."""

import xml.etree.ElementTree as ET

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import (
    NvidiaSmiParseError,
    Unreadable,
    csv_fields,
    number_at,
    parse_nvidia_smi,
    parse_nvlink_status,
    text_at,
)
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLines
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

FIXTURES = ("a100-sxm4-v12.xml", "a10g.xml", "quadro-p2000-v12.xml", "rtx-3060-v12.xml", "rtx-3080-v13.xml",
            "rtx-4000-sff-ada-v13.xml", "tesla-t4.xml")


def parsed(name):
    return parse_nvidia_smi(read_fixture("nvidia-smi", name))


def gpu0(name):
    return parsed(name)["gpus"][0]


def test_value_helpers_drop_units_and_not_available_markers():
    node = ET.fromstring("<t><w>16x</w><c>27 C</c><p>67.03 W</p><m>81920 MiB</m><u>0 %</u><na>N/A</na>"
                         "<neg>-7 C</neg><dep>Requested functionality has been deprecated</dep><b>192 bank(s)</b></t>")
    assert [number_at(node, tag) for tag in ("w", "c", "p", "m", "u", "b")] == [16, 27, 67.03, 81920, 0, 192]
    # Below zero only where a reading may be (T.Limit: degrees left below the limit); elsewhere out of range.
    assert number_at(node, "neg", signed=True) == -7 and number_at(node, "neg").raw == "value out of range (-7)"
    assert number_at(node, "na") is None and text_at(node, "na") is None
    assert text_at(node, "dep") is None and number_at(node, "missing") is None


@pytest.mark.parametrize("name", FIXTURES)
def test_every_recording_parses_with_identity_fields(name):
    data = parsed(name)
    assert data["driver_version"] and data["cuda_version"]
    gpu = data["gpus"][0]
    assert gpu["index"] == 0
    assert gpu["uuid"].startswith("GPU-") and gpu["name"] and gpu["pci_bus_id"].startswith("00000000:")
    assert gpu["pcie"]["width_max"] == 16  # every recorded card is x16
    assert gpu["clock_event_reasons"], "both throttle-reason element families are read"
    assert gpu["temperature"]["gpu_c"] is not None or gpu["temperature"]["tlimit_c"] is not None


def test_a100_mig_recording():
    data = parsed("a100-sxm4-v12.xml")
    gpu = data["gpus"][0]
    assert (data["driver_version"], data["cuda_version"], data["attached_gpus"]) == ("535.54.03", "12.2", 4)
    assert len(data["gpus"]) == 1  # the recording keeps one of the four <gpu> elements
    assert gpu["uuid"] == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert gpu["pci_bus_id"] == "00000000:01:00.0" and gpu["name"] == "NVIDIA A100-SXM4-80GB"
    assert gpu["persistence_mode"] == "Disabled" and gpu["architecture"] == "Ampere"
    assert gpu["mig"] == {"current": "Enabled", "pending": "Enabled", "instances": 4}
    assert gpu["remapped_rows"] is None  # "N/A" text while MIG is enabled
    assert gpu["ecc"]["current"] == "Enabled" and gpu["ecc"]["volatile"]["uncorrectable"] == 0
    assert gpu["utilization"]["gpu_pct"] is None  # N/A with MIG
    assert gpu["power"] == {"draw_w": 67.03, "limit_w": 500.0, "default_limit_w": 500.0, "min_limit_w": 100.0,
                            "max_limit_w": 500.0}
    assert gpu["temperature"]["gpu_c"] == 27 and gpu["temperature"]["slowdown_c"] == 89
    assert gpu["temperature"]["max_operating_c"] == 85 and gpu["temperature"]["memory_c"] == 44
    assert gpu["clocks"]["sm_mhz"] == 1275 and gpu["max_clocks"]["sm_mhz"] == 1410
    assert gpu["applications_clocks"]["graphics_mhz"] == gpu["default_applications_clocks"]["graphics_mhz"] == 1275
    assert gpu["clock_event_reasons"]["gpu_idle"] is False and gpu["clock_event_reasons"]["hw_slowdown"] is False
    assert gpu["fabric"] == {"state": None, "status": None, "clique_id": None, "cluster_uuid": None, "health_summary": None,
                             "bandwidth": None, "route_recovery": None, "route_unhealthy": None,
                             "access_timeout_recovery": None, "incorrect_configuration": None}


def test_t4_older_dtd_throttle_reasons_x8_link_and_retired_pages():
    gpu = gpu0("tesla-t4.xml")
    assert (gpu["pcie"]["width_current"], gpu["pcie"]["width_max"]) == (8, 16)
    assert (gpu["pcie"]["gen_current"], gpu["pcie"]["gen_max"]) == (3, 3)
    assert gpu["pcie"]["gen_device_max"] is None  # not in the older DTD
    # <clocks_throttle_reasons>/<clocks_throttle_reason_*> read into the same keys as the newer family.
    assert set(gpu["clock_event_reasons"]) == set(gpu0("a100-sxm4-v12.xml")["clock_event_reasons"])
    assert not any(gpu["clock_event_reasons"].values())
    assert gpu["retired_pages"] == {"single_bit": 0, "double_bit": 0, "pending": False}
    assert gpu["remapped_rows"] is None
    # power_readings (older element) with enforced_power_limit
    assert gpu["power"]["limit_w"] == 70.0 and gpu["power"]["draw_w"] == 26.78
    assert gpu["utilization"]["gpu_pct"] == 0 and gpu["performance_state"] == "P0"


def test_a10g_remapped_rows_structure_and_idle_gen1_link():
    gpu = gpu0("a10g.xml")
    assert gpu["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False,
                                    "histogram": {"max": 192, "high": 0, "partial": 0, "low": 0, "none": 0}}
    assert (gpu["pcie"]["width_current"], gpu["pcie"]["gen_current"], gpu["pcie"]["gen_max"]) == (8, 1, 4)
    assert gpu["clock_event_reasons"]["gpu_idle"] is True


def test_pascal_legacy_ecc_layout_is_not_available():
    gpu = gpu0("quadro-p2000-v12.xml")
    assert gpu["architecture"] == "Pascal" and gpu["ecc"]["current"] is None
    assert gpu["ecc"]["volatile"] == {"correctable": None, "uncorrectable": None, "dram_correctable": None,
                                      "dram_uncorrectable": None, "sram_correctable": None, "sram_uncorrectable": None}
    assert gpu["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}


def test_legacy_single_double_bit_counts_when_present():
    text = read_fixture("nvidia-smi", "quadro-p2000-v12.xml")
    # Plant counts in the pre-Ampere layout: 3 DBE in device memory, 5 SBE (2 in device memory).
    volatile = text.index("<volatile>")
    chunk = text[volatile:text.index("</volatile>")]
    edited = chunk.replace("<double_bit>\n\t\t\t\t\t<device_memory>N/A</device_memory>",
                           "<double_bit>\n\t\t\t\t\t<device_memory>3</device_memory>")
    edited = edited.replace("<total>N/A</total>\n\t\t\t\t</double_bit>", "<total>3</total>\n\t\t\t\t</double_bit>")
    edited = edited.replace("<single_bit>\n\t\t\t\t\t<device_memory>N/A</device_memory>",
                            "<single_bit>\n\t\t\t\t\t<device_memory>2</device_memory>")
    edited = edited.replace("<total>N/A</total>\n\t\t\t\t</single_bit>", "<total>5</total>\n\t\t\t\t</single_bit>")
    assert edited != chunk
    counts = parse_nvidia_smi(text.replace(chunk, edited))["gpus"][0]["ecc"]["volatile"]
    assert counts == {"correctable": 5, "uncorrectable": 3, "dram_correctable": 2, "dram_uncorrectable": 3,
                      "sram_correctable": 3, "sram_uncorrectable": 0}


def test_v13_ada_tlimit_temperatures_split_sram_counters_and_average_power():
    gpu = gpu0("rtx-4000-sff-ada-v13.xml")
    temp = gpu["temperature"]
    assert (temp["gpu_c"], temp["tlimit_c"], temp["slowdown_tlimit_c"], temp["shutdown_tlimit_c"]) == (38, 49, -2, -7)
    assert temp["slowdown_c"] is None  # only T.Limit thresholds in this recording
    assert gpu["ecc"]["current"] == "Disabled" and gpu["ecc"]["aggregate"]["uncorrectable"] is None
    assert gpu["power"]["draw_w"] == 8.81  # average_power_draw
    assert gpu["applications_clocks"]["graphics_mhz"] is None  # "Requested functionality has been deprecated"
    assert gpu["remapped_rows"]["histogram"]["max"] == 96


def test_v13_split_sram_uncorrectable_counters_are_summed():
    text = read_fixture("nvidia-smi", "rtx-4000-sff-ada-v13.xml")
    text = text.replace("<sram_uncorrectable_parity>N/A</sram_uncorrectable_parity>",
                        "<sram_uncorrectable_parity>2</sram_uncorrectable_parity>", 1)
    text = text.replace("<sram_uncorrectable_secded>N/A</sram_uncorrectable_secded>",
                        "<sram_uncorrectable_secded>1</sram_uncorrectable_secded>", 1)
    volatile = parse_nvidia_smi(text)["gpus"][0]["ecc"]["volatile"]
    assert volatile["sram_uncorrectable"] == 3 and volatile["uncorrectable"] == 3


def test_busy_rtx3080_and_values_the_clock_check_reads():
    gpu = gpu0("rtx-3080-v13.xml")
    assert gpu["utilization"]["gpu_pct"] == 65 and gpu["performance_state"] == "P2"
    assert (gpu["clocks"]["sm_mhz"], gpu["max_clocks"]["sm_mhz"]) == (1950, 2100)
    assert gpu["power"]["draw_w"] == 139.62 and gpu["power"]["limit_w"] == 320.0


@pytest.mark.parametrize("text, fragment", [
    ("", "empty output"),
    ("   \n", "empty output"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "syntax error"),
    ("<?xml version=\"1.0\" ?><other/>", "root element is <other>"),
])
def test_bad_input_raises_one_clear_error(text, fragment):
    with pytest.raises(NvidiaSmiParseError) as info:
        parse_nvidia_smi(text)
    assert fragment in str(info.value)


def test_truncated_recording_is_a_parse_error():
    text = read_fixture("nvidia-smi", "a10g.xml")
    with pytest.raises(NvidiaSmiParseError):
        parse_nvidia_smi(text[: len(text) // 2])


def test_nvlink_status_recording_and_planted_inactive_link():
    text = read_fixture("nvidia-smi-nvlink", "a100-sxm4-40gb-status.txt")
    (gpu,) = parse_nvlink_status(text)
    assert (gpu["index"], gpu["name"], gpu["uuid"]) == (0, "NVIDIA A100-SXM4-40GB", "GPU-fde0a018-ad1a-bbec-ccf6-50a9f64bd178")
    assert len(gpu["links"]) == 12 and all(link["active"] and link["speed_gbps"] == 25.0 for link in gpu["links"])
    (down,) = parse_nvlink_status(text.replace("Link 7: 25 GB/s", "Link 7: <inactive>"))
    assert [link["link"] for link in down["links"] if link["active"] is False] == [7]


def test_nvlink_status_without_links_and_with_unknown_text():
    gpus = parse_nvlink_status("GPU 0: Tesla T4 (UUID: GPU-d37e67a5-91dd-3774-a5cb-99096249601a)\n"
                               "GPU 1: NVIDIA RTX A4000 (UUID: GPU-aaaa) Device does not have or support Nvlink\n")
    assert [(g["index"], g["name"], g["links"]) for g in gpus] == [(0, "Tesla T4", []), (1, "NVIDIA RTX A4000", [])]
    (gpu,) = parse_nvlink_status("GPU 0: X (UUID: GPU-1)\n\t Link 0: some new state\n")
    assert gpu["links"][0]["active"] is None and gpu["links"][0]["state"] == "some new state"
    assert parse_nvlink_status("") == []


@pytest.mark.parametrize("raw, kind", [
    (None, "absent"), ("", "absent"), ("N/A", "absent"), ("[N/A]", "absent"), ("Not Supported", "absent"),
    ("[Not Supported]", "absent"), ("Not Available", "absent"), ("Requested functionality has been deprecated", "absent"),
    ("Unknown Error", "unreadable"), ("[Unknown Error]", "unreadable"), ("GPU is lost", "unreadable"),
    ("[GPU requires reset]", "unreadable"), ("Insufficient Permissions", "unreadable"), ("ERR!", "unreadable"),
    ("[Not Found]", "unreadable"), ("Timeout", "unreadable"), ("[Something New]", "unreadable"),
    ("27 C", "value"), ("None", "value"), ("Enabled", "value")])
def test_read_value_tells_absent_from_unreadable(raw, kind):
    from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import read_value
    assert read_value(raw)[0] == kind


def test_csv_fields_read_every_query_field_by_the_one_rule():
    # A recorded `nvidia-smi --query-gpu=... --format=csv` line, and copies with what nvidia-smi writes in a CSV field
    # it has no value for ([N/A], [Not Supported]) or could not read ([Unknown Error], [GPU requires reset]).
    line = read_fixture("nvidia-smi-query", "h100-pcie-350w-lms.csv").splitlines()[1]
    assert csv_fields(line) == ["2023/08/23 08:20:40.162", "0 %", "32", "48", "46.83 W", "46.73 W", "345 MHz", "1593 MHz"]
    planted_line = line.replace("32, 48", "[N/A], [Not Supported]").replace("46.83 W, 46.73 W", "[Unknown Error], [GPU requires reset]")
    planted = csv_fields(planted_line)
    assert planted[2:4] == [None, None] and planted[6:] == ["345 MHz", "1593 MHz"]
    assert [(type(v), v.raw) for v in planted[4:6]] == [(Unreadable, "[Unknown Error]"), (Unreadable, "[GPU requires reset]")]
    assert csv_fields("0, , N/A, Not Supported") == ["0", None, None, None]


def test_unreadable_values_are_none_and_named_in_the_record():
    text = read_fixture("nvidia-smi", "rtx-3080-v13.xml")
    text = text.replace("<gpu_temp>27 C</gpu_temp>", "<gpu_temp>[Unknown Error]</gpu_temp>", 1)
    text = text.replace("<replay_counter>0</replay_counter>", "<replay_counter>%s</replay_counter>" % ("9" * 5000), 1)
    text = text.replace("<gpu_recovery_action>None", "<gpu_recovery_action>Drain and Reset", 1)
    gpu = parse_nvidia_smi(text)["gpus"][0]
    assert gpu["temperature"]["gpu_c"] is None and gpu["unreadable"]["temperature.gpu_c"] == "[Unknown Error]"
    assert gpu["pcie"]["replay_counter"] is None and gpu["unreadable"]["pcie.replay_counter"].startswith("value out of range")
    assert gpu["recovery"]["action"] == "Drain and Reset" and gpu["virtualization_mode"] == "None"
    assert len(gpu["unreadable"]["pcie.replay_counter"]) < 100


@pytest.mark.parametrize("text", ("1e999", "inf", "nan", "9" * 30, "-" + "9" * 5000, "18446744073709551617 MiB",
                                  str(2 ** 64), "0x10", "0xFF MiB", "2^64", "1.5.3 W", "-1 C", "16x4"))
def test_numbers_beyond_range_are_unreadable_not_numbers(text):
    from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import Unreadable
    node = ET.fromstring("<t><v>%s</v></t>" % text)
    assert isinstance(number_at(node, "v"), Unreadable)


def test_a_bad_nvlink_status_line_is_counted_and_a_bad_gpu_line_never_lends_its_links_to_another_gpu():
    # Issue 23: two copies of the A100 recording, the second GPU's index a 5,000-digit number and one speed "1.2.3".
    text = read_fixture("nvidia-smi-nvlink", "a100-sxm4-40gb-status.txt")
    second = text.replace("GPU 0:", "GPU %s:" % ("9" * 5000), 1)
    bad = BadLines()
    gpus = parse_nvlink_status(text.replace("Link 3: 25 GB/s", "Link 3: 1.2.3 GB/s") + second, bad)
    assert [(g["index"], len(g["links"])) for g in gpus] == [(0, 11)]
    assert bad.count == 1 + 1 + 12 and bad.sample[0]["error"] == "could not convert string to float: '1.2.3'"

"""The interconnect checks on data the real probes and parsers made of recordings, faults planted in copies."""

import re

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvidia_smi
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvlink_errors import parse_nvlink_errors
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLines
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS, SKIP, WARN
from ansible_collections.continuum.hydra.tests.support import interconnect as ic
from ansible_collections.continuum.hydra.tests.support.envelopes import ok
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

T = ic.T0


def _cleared(root):
    """The recording's saturated counters cleared (perfquery -R), so its lifetime totals are what a check reports."""
    for device in ("mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9", "mlx5_bond_0"):
        ic.set_counter(root, device, "excessive_buffer_overrun_errors", 0)
    ic.set_counter(root, "mlx5_1", "link_downed", 0)
    return root


def test_ib_counters_reports_lifetime_totals_and_hands_over_the_thresholds(tmp_path):
    root = _cleared(ic.ib_root(tmp_path, "h"))
    record = ic.ib_check(root, T)
    assert record["status"] == PASS
    assert record["message"] == ("9 port(s) read; lifetime errors (information: the fleet report judges the rates across runs): "
                                 "mlx5_0/1 port_rcv_errors 14, mlx5_1/1 port_rcv_errors 14, mlx5_4/1 port_rcv_errors 14 (and 15 more)")
    assert record["details"]["read_at"] == T
    assert record["details"]["thresholds"] == {"ib_symbol_error_per_hour": 120, "ib_link_downed_max": 0,
                                               "ib_link_error_recovery_per_minute": 5, "ib_port_rcv_errors_per_second": 10,
                                               "ib_port_xmit_discards_per_second": 100, "interconnect_clean_runs": 3}
    tuned = ic.ib_check(root, T, {"ib_symbol_error_per_hour": 60, "ib_devices": ["mlx5_4"]})
    assert tuned["details"]["thresholds"]["ib_symbol_error_per_hour"] == 60 and len(tuned["details"]["ports"]) == 1
    assert ic.ib_check(root, T, {"ib_devices": ["mlx5_99"]})["status"] == SKIP


def test_ib_counters_warns_on_saturated_and_unreadable_counters_and_errors_on_a_bad_threshold(tmp_path):
    root = ic.ib_root(tmp_path, "h")
    record = ic.ib_check(root, T)
    assert record["status"] == WARN and record["message"].startswith(
        "saturated (stuck at the maximum): mlx5_0/1 excessive_buffer_overrun_errors, mlx5_1/1 link_downed,")
    assert "perfquery -x -R" in record["remediation"]
    (ic.port_dir(root, "mlx5_5") / "counters/symbol_error").write_text("N/A (no PMA)\n")
    record = ic.ib_check(root, T)
    assert record["status"] == WARN and record["message"].startswith("1 counter(s) unreadable: mlx5_5/1 symbol_error;")
    bad = ic.ib_check(root, T, {"ib_symbol_error_per_hour": -1})
    assert (bad["status"], bad["message"]) == (ERROR, "expect.ib_symbol_error_per_hour: -1 is below 0; accepted: a number >= 0")
    assert ic.ib_check(root, T, {"interconnect_clean_runs": 0})["status"] == ERROR


def test_nvlink_errors_names_the_gpu_and_link_of_a_lifetime_count():
    smi = parse_nvidia_smi(read_fixture("nvidia-smi", "rtx-3080-v13.xml"))
    record = ic.nvlink_check(smi, T, ic.nvlink_text({(17, "CRC Errors"): 5}))
    assert record["status"] == PASS and record["message"].endswith(
        "GPU 0 00000000:0C:00.0 GPU-19d6d965-2acc-f646-00f8-4c76979aabb4 NVLink 17 crc_errors 5")
    (reading,) = record["details"]["readings"]
    assert reading["links"] == ["0", "1", "17"] and reading["errors"] == {"17": {"crc_errors": 5}}
    assert record["details"]["thresholds"] == {"nvlink_crc_errors_per_second": 100, "nvlink_replay_recovery_max": 0,
                                               "interconnect_clean_runs": 3}


def _by_bus_id(text, address):
    """The recorded `nvidia-smi nvlink -e` with its GPU line in the bus-id form recent drivers print."""
    text, n = re.subn(r"^GPU 0: .*$", "GPU %s" % address, text, flags=re.M)
    assert n == 1
    return text


def _nvlink_record(smi, text):
    bad = BadLines()
    data = {"source": "nvidia-smi", "read_at": T, "gpus": parse_nvlink_errors(text, bad), "bad_lines": bad.as_dict()}
    return ic.judge("gpu.nvlink_errors", nvidia_smi=ok(smi), nvlink_errors=ok(data))


def test_nvlink_errors_of_a_gpu_named_by_its_bus_id_are_matched_to_nvidia_smi_by_pci_address():
    # Review: a GPU that `nvidia-smi nvlink -e` names by bus id was matched by UUID or index only: "GPU None NVLink 1
    # replay_errors 5", and the fleet report kept no reading of it.
    smi = parse_nvidia_smi(read_fixture("nvidia-smi", "rtx-3080-v13.xml"))   # GPU 0 at 00000000:0C:00.0
    record = _nvlink_record(smi, _by_bus_id(ic.nvlink_text({(1, "Replay Errors"): 5}), "00000000:0c:00.0"))
    assert record["status"] == PASS and record["message"].endswith(
        "GPU 0 00000000:0C:00.0 GPU-19d6d965-2acc-f646-00f8-4c76979aabb4 NVLink 1 replay_errors 5")
    (reading,) = record["details"]["readings"]
    assert (reading["index"], reading["uuid"], reading["errors"]) == (
        0, "GPU-19d6d965-2acc-f646-00f8-4c76979aabb4", {"1": {"replay_errors": 5}})
    # A GPU nvidia-smi does not list is named by the address the tool gave, never "GPU None".
    unknown = _nvlink_record(smi, _by_bus_id(ic.nvlink_text({(1, "Replay Errors"): 5}), "00000000:18:00.0"))
    assert unknown["message"].endswith("GPU at 00000000:18:00.0 NVLink 1 replay_errors 5")
    # Unreadable counters of such a GPU: the warning names it the same way.
    text = _by_bus_id(ic.nvlink_text(), "00000000:18:00.0").replace("Link 1: CRC Errors: 0", "Link 1: CRC Errors: 12x")
    bad = BadLines()
    gpus = parse_nvlink_errors(text, bad)
    gpus[0]["unreadable"] = {"link 1 crc_errors": "12x is not a count"}
    data = {"source": "nvidia-smi", "read_at": T, "gpus": gpus, "bad_lines": bad.as_dict()}
    warned = ic.judge("gpu.nvlink_errors", nvidia_smi=ok(smi), nvlink_errors=ok(data))
    assert warned["message"].startswith("counters unreadable on 1 GPU(s): GPU at 00000000:18:00.0 link 1 crc_errors;")


def test_pcie_aer_names_the_gpu_by_index_and_warns_on_a_file_without_total(tmp_path):
    smi = parse_nvidia_smi(read_fixture("nvidia-smi", "rtx-3080-v13.xml"))   # GPU 0 at 00000000:0C:00.0
    functions = [{"address": "0000:0c:00.0", "kind": "gpu", "name": None}]
    root = ic.aer_root(tmp_path, "h", ["0000:0c:00.0"])
    ic.set_aer(root, "0000:0c:00.0", "correctable", 12, "RxErr")
    record = ic.aer_check(root, functions, T, smi)
    assert record["status"] == PASS and record["message"].endswith("0000:0c:00.0 (GPU 0) correctable 12")
    assert record["details"]["devices"][0]["gpu_uuid"] == smi["gpus"][0]["uuid"]
    (root / "sys/bus/pci/devices/0000:0c:00.0/aer_dev_fatal").write_text("Undefined 0\n")
    assert ic.aer_check(root, functions, T, smi)["status"] == WARN


def _fabric_xml(*gpus):
    """The recorded v13 XML (its fabric block N/A), one <gpu> per (bus id, uuid, state, clique, bandwidth) planted."""
    xml = read_fixture("nvidia-smi", "rtx-3080-v13.xml")
    head, gpu, tail = re.match(r"(?s)(.*?)(\t<gpu id=.*?</gpu>\n)(.*)", xml).groups()
    blocks = []
    for bus, uuid, state, clique, bandwidth in gpus:
        block = gpu.replace('id="00000000:0C:00.0"', 'id="%s"' % bus).replace("GPU-19d6d965-2acc-f646-00f8-4c76979aabb4", uuid)
        block = re.sub(r"<fabric>\s*<state>N/A</state>\s*<status>N/A</status>\s*<cliqueId>N/A</cliqueId>\s*<clusterUuid>N/A</clusterUuid>"
                       r"\s*<health>\s*<summary>N/A</summary>\s*<bandwidth>N/A</bandwidth>",
                       "<fabric><state>%s</state><status>Success</status><cliqueId>%d</cliqueId>"
                       "<clusterUuid>5cd30dc8-1d1e-4f2a-9b6e-2f3c4d5e6f70</clusterUuid><health><summary>Healthy</summary>"
                       "<bandwidth>%s</bandwidth>" % (state, clique, bandwidth), block)
        assert "<cliqueId>%d</cliqueId>" % clique in block
        blocks.append(block.replace("<pci_bus_id>00000000:0C:00.0</pci_bus_id>", "<pci_bus_id>%s</pci_bus_id>" % bus))
    return parse_nvidia_smi(head + "".join(blocks) + tail)


GB200 = [("00000008:01:00.0", "GPU-aaaaaaaa-0000-0000-0000-000000000001", "Completed", 7, "Full"),
         ("00000009:01:00.0", "GPU-aaaaaaaa-0000-0000-0000-000000000002", "Completed", 7, "Full")]


def _fabric(smi, expect=None, nvswitches=None):
    envelopes = {"nvidia_smi": ok(smi)}
    if nvswitches is not None:
        envelopes["nvidia_pci"] = ok({"gpus": [], "nvswitches": nvswitches})
    return ic.judge("gpu.fabric_state", expect, **envelopes)


def test_fabric_state_of_multi_node_nvlink_gpus():
    assert _fabric(parse_nvidia_smi(read_fixture("nvidia-smi", "rtx-3080-v13.xml")))["status"] == SKIP   # N/A: no fabric
    good = _fabric(_fabric_xml(*GB200), {"nvlink_domain": "rack-12"})
    assert (good["status"], good["message"]) == (
        PASS, "2 GPU(s) on the NVLink fabric: cluster 5cd30dc8-1d1e-4f2a-9b6e-2f3c4d5e6f70, clique 7, NVLink domain rack-12")
    assert good["details"]["gpus"][1]["clique_id"] == 7 and good["details"]["nvlink_domain"] == "rack-12"
    training = _fabric(_fabric_xml(GB200[0], GB200[1][:2] + ("In Progress", 7, "Full")))
    assert (training["status"], training["message"]) == (FAIL, "1 GPU(s) not on the NVLink fabric: GPU 1 state In Progress, status Success")
    assert [g["uuid"] for g in training["details"]["gpus"]] == [GB200[1][1]]
    degraded = _fabric(_fabric_xml(GB200[0], GB200[1][:4] + ("Degraded",)))
    assert degraded["status"] == WARN and degraded["message"] == "fabric health of 1 GPU(s): GPU 1 Healthy, bandwidth Degraded"
    split = _fabric(_fabric_xml(GB200[0], GB200[1][:3] + (9, "Full")))
    assert split["status"] == WARN and split["message"].endswith("clique 7 / 9")
    assert _fabric(_fabric_xml(*GB200), nvswitches=["0000:07:00.0"])["status"] == SKIP   # gpu.fabric_manager's

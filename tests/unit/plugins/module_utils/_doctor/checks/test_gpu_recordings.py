"""doctor's GPU checks on the older-driver, MIG, vGPU and multi-GPU `nvidia-smi -q -x` recordings
(tests/fixtures/nvidia-smi/README.md "More recordings") and the repair state of the k8s-test-infra ones, with faults
planted in copies: a lost, unreadable or failing GPU is never PASS."""

import copy

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS, SKIP, WARN
from ansible_collections.continuum.hydra.tests.support.nvidia import GPU_CHECKS, blank_readings, judge, smi

MORE = ("tesla-v100-pcie-32gb-v11.xml", "tesla-v100s-pcie-32gb-x8-v11.xml", "a100-sxm4-40gb-mig-v11.xml",
        "tesla-p100-pcie-16gb-v11.xml", "quadro-p400-418.xml", "grid-p4-1q-vgpu-v11.xml")
VALUE_CHECKS = [c.id for c in GPU_CHECKS if c.id.startswith("gpu.") and c.id not in ("gpu.nvml_available", "gpu.nvml_devices")]


def statuses(data, *check_ids):
    return dict((cid, judge(cid, data)["status"]) for cid in check_ids or VALUE_CHECKS)


@pytest.mark.parametrize("name, expected", [
    ("tesla-v100-pcie-32gb-v11.xml", {"gpu.ecc_errors": PASS, "gpu.row_remap": PASS, "gpu.ecc_mode": PASS, "gpu.mig": SKIP,
                                      "gpu.persistence_mode": WARN, "gpu.recovery_action": SKIP, "gpu.pcie_link": PASS,
                                      "gpu.temperature": PASS, "gpu.power": PASS, "gpu.clocks": PASS}),
    ("tesla-v100s-pcie-32gb-x8-v11.xml", {"gpu.ecc_errors": PASS, "gpu.row_remap": PASS, "gpu.pcie_link": PASS,
                                          "gpu.clocks": PASS, "gpu.persistence_mode": WARN}),
    ("a100-sxm4-40gb-mig-v11.xml", {"gpu.mig": PASS, "gpu.ecc_errors": PASS, "gpu.row_remap": SKIP, "gpu.clocks": PASS}),
    ("tesla-p100-pcie-16gb-v11.xml", {"gpu.ecc_errors": PASS, "gpu.row_remap": PASS, "gpu.temperature": PASS}),
    ("quadro-p400-418.xml", {"gpu.ecc_errors": SKIP, "gpu.row_remap": SKIP, "gpu.pcie_link": PASS, "gpu.temperature": PASS,
                             "gpu.power": SKIP, "gpu.recovery_action": SKIP}),
    ("grid-p4-1q-vgpu-v11.xml", {"gpu.temperature": SKIP, "gpu.power": SKIP, "gpu.clocks": SKIP, "gpu.ecc_errors": SKIP,
                                 "gpu.pcie_link": SKIP, "gpu.recovery_action": SKIP}),
])
def test_each_recording_as_a_person_judges_it(name, expected):
    data = smi(name)
    found = statuses(data)
    assert {cid: found[cid] for cid in expected} == expected
    assert not [cid for cid, status in found.items() if status in (FAIL, ERROR)], found


@pytest.mark.parametrize("name", [name for name in MORE if "vgpu" not in name])
def test_a_gpu_listed_with_every_reading_na_is_error_never_healthy(name):
    data = smi(name, blank_readings)
    for cid in VALUE_CHECKS:
        if cid in ("gpu.count", "gpu.model", "gpu.xid_errors", "gpu.nvlink", "gpu.fabric_manager"):
            continue
        record = judge(cid, data)
        assert record["status"] == ERROR, (name, cid, record["message"])
        assert 0 in [g["index"] for g in record["details"]["gpus"]], cid


def test_messages_say_what_the_recordings_show():
    mig = judge("gpu.mig", smi("a100-sxm4-40gb-mig-v11.xml"))
    assert "MIG enabled on 1 of 1 capable GPU(s) (2 instances)" in mig["message"]
    remap = judge("gpu.row_remap", smi("a100-sxm4-40gb-mig-v11.xml"))
    assert "not reported while MIG is enabled" in remap["message"]
    eight = judge("gpu.count", smi("tesla-v100s-pcie-32gb-x8-v11.xml"))
    assert eight["message"] == "8 GPU(s): 8x Tesla V100S-PCIE-32GB (no gpu_count expected)"
    assert judge("driver.version", smi("tesla-v100-pcie-32gb-v11.xml"))["details"]["driver_version"] == "460.39"
    vgpu = judge("gpu.temperature", smi("grid-p4-1q-vgpu-v11.xml"))
    assert "vGPU guest (virtualization mode VGPU)" in vgpu["message"]
    # The P100's three lifetime correctable errors in device memory are counted, not judged (no uncorrectable one).
    ecc = judge("gpu.ecc_errors", smi("tesla-p100-pcie-16gb-v11.xml"))
    assert ecc["message"] == "no uncorrectable ECC errors on 1 GPU(s)"
    assert ecc["details"]["gpus"][0]["aggregate"]["dram_correctable"] == 3


def test_a_lost_gpu_among_eight_is_fail_and_only_that_gpu_is_named():
    paths = ("temperature/gpu_temp", "power_readings/power_draw", "clocks/sm_clock", "pci/replay_counter",
             "retired_pages/double_bit_retirement/retired_count", "ecc_errors/volatile/double_bit/total")
    lost = [(path, "[GPU is lost]", 5) for path in paths]
    data = smi("tesla-v100s-pcie-32gb-x8-v11.xml", *lost)
    for cid in ("gpu.temperature", "gpu.power", "gpu.clocks", "gpu.pcie_replay", "gpu.row_remap", "gpu.ecc_errors",
                "gpu.recovery_action"):
        record = judge(cid, data)
        assert record["status"] == FAIL, (cid, record["message"])
        assert [g["index"] for g in record["details"]["gpus"]] == [5], cid
        assert record["message"].startswith("1 of 8 GPUs: GPU 5 00000000:00:12.0") or cid == "gpu.recovery_action"
        assert "lost" in record["message"]


def test_gpu_requires_reset_on_a_driver_without_recovery_fields_is_fail():
    data = smi("tesla-v100-pcie-32gb-v11.xml", ("utilization/gpu_util", "GPU requires reset", 0))
    record = judge("gpu.recovery_action", data)
    assert record["status"] == FAIL and "utilization.gpu_pct unreadable ('GPU requires reset')" in record["message"]
    assert judge("gpu.pcie_link", data)["status"] == FAIL and judge("gpu.clocks", data)["status"] == FAIL


@pytest.mark.parametrize("path, text", [
    ("ecc_errors/volatile/double_bit/total", "Unknown Error"),
    ("ecc_errors/aggregate/single_bit/device_memory", "ERR!"),
    ("retired_pages/pending_retirement", "Insufficient Permissions"),
])
def test_unreadable_memory_counters_of_the_pre_ampere_layout_are_error(path, text):
    data = smi("tesla-v100-pcie-32gb-v11.xml", (path, text, 0))
    check = "gpu.row_remap" if path.startswith("retired") else "gpu.ecc_errors"
    record = judge(check, data)
    assert record["status"] == ERROR and text in record["message"], record["message"]


def test_uncorrectable_errors_in_the_pre_ampere_layout():
    since_boot = smi("tesla-v100-pcie-32gb-v11.xml", ("ecc_errors/volatile/double_bit/device_memory", "2", 0),
                     ("ecc_errors/volatile/double_bit/total", "2", 0))
    record = judge("gpu.ecc_errors", since_boot)
    assert record["status"] == FAIL and "volatile DRAM 2" in record["message"]
    lifetime = smi("tesla-p100-pcie-16gb-v11.xml", ("ecc_errors/aggregate/double_bit/l2_cache", "1", 0),
                   ("ecc_errors/aggregate/double_bit/total", "1", 0))
    record = judge("gpu.ecc_errors", lifetime)
    assert record["status"] == WARN and "aggregate SRAM 1" in record["message"]


def test_retired_pages_pending_and_at_the_limit():
    pending = judge("gpu.row_remap", smi("tesla-v100-pcie-32gb-v11.xml", ("retired_pages/pending_retirement", "Yes", 0)))
    assert pending["status"] == WARN and "page retirement pending" in pending["message"]
    full = judge("gpu.row_remap", smi("tesla-p100-pcie-16gb-v11.xml",
                                      ("retired_pages/double_bit_retirement/retired_count", "15", 0)))
    assert full["status"] == FAIL and "15 pages retired (15 for double-bit errors)" in full["message"]


def _mig_instance(index, text):
    def edit(root):
        root.findall("gpu/mig_devices/mig_device")[index].find("ecc_error_count/volatile_count/sram_uncorrectable").text = text
    return edit


def test_an_uncorrectable_error_on_one_mig_instance_is_fail():
    # Failed before (PASS): with MIG on, driver 510 counts volatile SRAM uncorrectable errors per MIG device only.
    record = judge("gpu.ecc_errors", smi("a100-sxm4-40gb-mig-v11.xml", _mig_instance(1, "1")))
    assert record["status"] == FAIL and "volatile SRAM 1" in record["message"]
    record = judge("gpu.ecc_errors", smi("a100-sxm4-40gb-mig-v11.xml", _mig_instance(0, "Unknown Error")))
    assert record["status"] == ERROR and "ecc.volatile.sram_uncorrectable unreadable ('Unknown Error')" in record["message"]


def _repair(element, text, gpu=0):
    return ("ecc_errors/" + element, text, gpu)


@pytest.mark.parametrize("edit, status, words", [
    (_repair("channel_repair_pending", "Yes"), WARN, "memory channel repair pending: reset needed"),
    (_repair("tpc_repair_pending", "Yes"), WARN, "TPC repair pending: reset needed"),
    (_repair("unrepairable_memory", "Yes", 2), FAIL, "memory errors that no repair can fix"),
    (_repair("tpc_repair_pending", "Unknown Error"), ERROR, "repair.tpc_pending unreadable ('Unknown Error')"),
    (_repair("channel_repair_pending", "GPU requires reset", 3), FAIL, "lost or needing a reset"),
])
def test_repair_state_of_a_gb200_is_judged(edit, status, words):
    # Failed before (PASS): the repair elements were not read.
    record = judge("gpu.row_remap", smi("qx-gb200.xml", edit, folder="k8s-test-infra"))
    assert record["status"] == status and words in record["message"], record["message"]
    assert [g["index"] for g in record["details"]["gpus"]] == [edit[2]]


def test_repair_state_beside_a_pending_remap_keeps_the_worse_and_names_both():
    data = smi("qx-gb200.xml", ("remapped_rows/remapped_row_pending", "Yes", 1),
               _repair("unrepairable_memory", "Yes", 1), folder="k8s-test-infra")
    record = judge("gpu.row_remap", data)
    assert record["status"] == FAIL and "memory errors that no repair can fix" in record["message"]
    data = smi("qx-gb200.xml", ("remapped_rows/remapped_row_pending", "Yes", 1), _repair("tpc_repair_pending", "Yes", 1),
               folder="k8s-test-infra")
    record = judge("gpu.row_remap", data)
    assert record["status"] == WARN
    assert "row remap pending: reset needed; also TPC repair pending: reset needed" in record["message"]


def test_repair_state_judged_where_remapping_is_not_reported_and_no_alone_judges_nothing():
    healthy = judge("gpu.row_remap", smi("qx-gb200.xml", folder="k8s-test-infra"))
    assert healthy["status"] == PASS and healthy["message"] == "no pending or failed row remap / page retirement on 4 GPU(s)"
    assert healthy["details"]["gpus"][0]["repair"] == {"channel_pending": False, "tpc_pending": False,
                                                       "unrepairable_memory": False}

    def no_remap(root):
        for gpu in root.findall("gpu"):
            node = gpu.find("remapped_rows")
            for child in list(node):
                node.remove(child)
            node.text = "N/A"
    assert judge("gpu.row_remap", smi("qx-gb200.xml", no_remap, folder="k8s-test-infra"))["status"] == SKIP
    record = judge("gpu.row_remap", smi("qx-gb200.xml", no_remap, _repair("channel_repair_pending", "Yes", 1),
                                        folder="k8s-test-infra"))
    assert record["status"] == WARN and [g["index"] for g in record["details"]["gpus"]] == [1]


def test_a_lost_vgpu_guest_is_never_healthy():
    data = smi("grid-p4-1q-vgpu-v11.xml", ("temperature/gpu_temp", "[GPU is lost]", 0))
    found = statuses(data)
    assert found["gpu.recovery_action"] == FAIL
    # what the GPU is, and its license, hold whatever its health; every reading of its health is not PASS
    assert PASS not in [found[cid] for cid in VALUE_CHECKS if cid not in ("gpu.count", "gpu.model", "gpu.xid_errors", "gpu.vgpu_license")]


def test_two_copies_of_the_mig_gpu_one_lost_mid_read():
    def second_gpu_lost(root):
        clone = copy.deepcopy(root.find("gpu"))
        clone.find("uuid").text = "GPU-27b94a00-ed54-5c24-b1fd-000000000001"
        clone.find("pci/pci_bus_id").text = "00000000:00:05.0"
        clone.find("mig_mode/current_mig").text = "GPU is lost"
        clone.findall("mig_devices/mig_device")[0].find("ecc_error_count/volatile_count/sram_uncorrectable").text = "GPU is lost"
        root.append(clone)
    data = smi("a100-sxm4-40gb-mig-v11.xml", second_gpu_lost)
    for cid in ("gpu.mig", "gpu.ecc_errors", "gpu.recovery_action"):
        record = judge(cid, data)
        assert record["status"] == FAIL and [g["index"] for g in record["details"]["gpus"]] == [1], (cid, record["message"])


@pytest.mark.parametrize("state, status, said", [
    (None, PASS, "licensed on 1 GPU"),  # the recording as it is
    ("Unlicensed (Restricted)", FAIL, "unlicensed: performance and features restricted (Unlicensed (Restricted))"),
    ("Unlicensed", FAIL, "unlicensed: performance and features restricted"),  # the recording is a vGPU guest
    ("Unlicensed (Unrestricted)", WARN, "not licensed (Unlicensed (Unrestricted)): full speed only until its grace period ends"),
    ("Uninitialized", ERROR, "vgpu_license"),  # NVML's error string too: read as unreadable, never as licensed
    ("Unknown Error", ERROR, "vgpu_license"),
    ("[GPU is lost]", FAIL, "lost"),
])
def test_a_vgpu_guests_license_state_is_judged(state, status, said):
    edits = [] if state is None else [("vgpu_software_licensed_product/license_status", state, 0)]
    data = smi("grid-p4-1q-vgpu-v11.xml", *edits)
    if state is None:
        assert data["gpus"][0]["vgpu_license"] == "Licensed (Expiry: 2022-9-22 6:57:30 GMT)"
    elif status != ERROR and "lost" not in said:
        assert data["gpus"][0]["vgpu_license"] == state
    found = judge("gpu.vgpu_license", data)
    assert found["status"] == status and said in found["message"], found["message"]


@pytest.mark.parametrize("name", ["a100-sxm4-v12.xml", "tesla-t4.xml", "tesla-v100-pcie-32gb-v11.xml"])
def test_a_gpu_without_a_vgpu_license_is_not_judged_on_it(name):
    data = smi(name)
    assert [gpu["vgpu_license"] for gpu in data["gpus"]] == [None] * len(data["gpus"])
    assert judge("gpu.vgpu_license", data)["status"] == SKIP


def test_a_pass_through_gpus_plain_unlicensed_warns():
    data = smi("grid-p4-1q-vgpu-v11.xml", ("vgpu_software_licensed_product/license_status", "Unlicensed", 0),
               ("gpu_virtualization_mode/virtualization_mode", "Pass-Through", 0))
    found = judge("gpu.vgpu_license", data)
    assert found["status"] == WARN and "not licensed (Unlicensed)" in found["message"], found["message"]

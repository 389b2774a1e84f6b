"""The active checks as pure functions of the active probes' data (fake worker answers, plain dicts).

The figures are the ones the SKU table cites for an H100 SXM host (bf16 matmul ~794 TFLOP/s measured, DCGM's
2,540 GB/s device memory, Gen5 x16 pinned copies ~55 GB/s, 8-GPU all-reduce busbw ~370-480 GB/s); faults are
planted by editing one GPU: a result that differs, a slow GPU, a link at x8 under load, a deadline that ran out.
"""

import copy

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import levels
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.tests.support.envelopes import ok

H100 = "NVIDIA H100 80GB HBM3"
GPU_CHECKS = ("gpu.matmul_consistency", "gpu.memory_bandwidth", "gpu.pcie_under_load", "gpu.allreduce_local")


def gpu_answer(index, name=H100, fp32="ae452fa83da460", bf16="adb3ebd768"):
    return {
        "index": index, "name": name, "uuid": "GPU-%08d-0000-0000-0000-000000000000" % index,
        "pci_bus_id": "0000:%02x:00.0" % (0x18 + index), "capability": "9.0",
        "link_idle": {"gen": 1, "width": 16, "gen_max": 5, "width_max": 16},
        "consistency": {"fp32": {"checksum": fp32, "max_rel_error": 2.1e-7}, "bf16": {"checksum": bf16, "max_rel_error": 0.0041}},
        "bf16_tflops": 781.4, "fp32_tflops": 51.2, "memory_bandwidth_gbps": 2655.0,
        "pcie": {"h2d_gbps": 55.2, "d2h_gbps": 54.8,
                 "link_under_load": {"samples": 40, "gen_min": 5, "width_min": 16, "gen_max": 5, "width_max": 16}},
    }


def host_answer(count=8, name=H100):
    return {"status": "ok", "torch_version": "2.5.1+cu124", "cuda_version": "12.4", "hip_version": None,
            "cuda_available": True, "gpus": [gpu_answer(i, name) for i in range(count)], "not_run": [],
            "steps": [{"step": "gpu 0 consistency", "seconds": 0.41}], "matrix_n": 8192, "check_n": 1024, "seed": 20261124,
            "allreduce": {"gpus": count, "bytes": 268435456, "algbw_gbps": 241.0, "busbw_gbps": 421.8, "backend": "nccl",
                          "nccl_version": "2.21.5"} if count > 1 else None}


def judge(check_id, data=None, expect=None, envelope=None, smi=None):
    chk = [c for c in CATALOGUE if c.id == check_id][0]
    name = chk.probes[0]
    probes = {name: envelope or ok(data)}
    probes.update((other, ok(smi) if smi is not None else {"status": "absent", "data": None, "reason": "not on this host"})
                  for other in chk.probes[1:])
    return registry.evaluate(chk, probes, expect or {})


def test_every_active_check_is_deep_and_reads_one_active_probe():
    active = dict((c.id, c) for c in CATALOGUE if c.id in GPU_CHECKS + ("system.memory_bandwidth",))
    assert len(active) == 5
    assert all(c.level == levels.DEEP for c in active.values())
    assert all(c.requires == ("gpu_active",) and c.uses == ("nvidia_smi",) for c_id, c in active.items() if c_id in GPU_CHECKS)
    assert active["system.memory_bandwidth"].probes == ("memory_active",)


def test_a_healthy_h100_host_passes_every_gpu_check():
    for check_id in GPU_CHECKS:
        result = judge(check_id, host_answer())
        assert result["status"] == "PASS", (check_id, result["message"])


@pytest.mark.parametrize("check_id", GPU_CHECKS)
def test_no_torch_or_no_gpu_is_skip_with_the_reason(check_id):
    for reason in ("torch is not importable by /usr/bin/python3: No module named 'torch'",
                   "torch 2.13.0+cpu in /usr/bin/python3 sees no GPU (CUDA/ROCm not available)"):
        result = judge(check_id, envelope={"status": "absent", "data": None, "reason": reason})
        assert result["status"] == "SKIP" and result["message"] == reason


@pytest.mark.parametrize("check_id", GPU_CHECKS + ("system.memory_bandwidth",))
def test_a_failed_worker_is_error(check_id):
    result = judge(check_id, envelope={"status": "error", "data": None, "reason": "active GPU worker timed out after 240s"})
    assert result["status"] == "ERROR" and "timed out after 240s" in result["message"]


# ---------------------------------------------------------------- matmul consistency

def test_the_gpu_whose_bits_differ_from_its_peers_is_named():
    data = host_answer()
    data["gpus"][5]["consistency"]["bf16"]["checksum"] = "ffff0000"
    result = judge("gpu.matmul_consistency", data)
    assert result["status"] == "FAIL"
    assert result["message"] == "GPU 5 0000:1d:00.0 GPU-00000005-0000-0000-0000-000000000000: bf16 result differs bitwise from the other %s GPUs" % H100
    assert "dcgmi diag" in result["remediation"]


def test_a_result_off_the_cpu_reference_fails_even_without_peers():
    data = host_answer(count=1)
    data["gpus"][0]["consistency"]["fp32"]["max_rel_error"] = 0.37
    result = judge("gpu.matmul_consistency", data)
    assert result["status"] == "FAIL" and "fp32 product off the CPU reference by 0.37 (tolerance 0.001)" in result["message"]


def test_two_gpus_that_disagree_within_tolerance_warn_naming_both():
    data = host_answer(count=2)
    data["gpus"][1]["consistency"]["fp32"]["checksum"] = "1234"
    result = judge("gpu.matmul_consistency", data)
    assert result["status"] == "WARN"
    assert "GPU 0 " in result["message"] and "GPU 1 " in result["message"] and "no majority" in result["message"]


def test_models_are_compared_within_their_model_only():
    data = host_answer(count=2)
    data["gpus"][1] = gpu_answer(1, name="NVIDIA A100-SXM4-80GB", fp32="other", bf16="other")
    data["gpus"][1].update(bf16_tflops=270.0, memory_bandwidth_gbps=1700.0)
    assert judge("gpu.matmul_consistency", data)["status"] == "PASS"


def test_a_slow_gpu_below_the_fraction_of_the_sku_figure_fails():
    data = host_answer()
    data["gpus"][3]["bf16_tflops"] = 512.0  # 0.64 of the 794.5 measured: below 0.75
    result = judge("gpu.matmul_consistency", data)
    assert result["status"] == "FAIL"
    assert result["message"].startswith("GPU 3 0000:1b:00.0 GPU-00000003-0000-0000-0000-000000000000: bf16 matmul 512.0 TFLOP/s, below 0.75 x 794.5")
    assert judge("gpu.matmul_consistency", data, expect={"matmul_min_fraction": 0.6})["status"] == "PASS"


def test_an_unknown_model_is_judged_against_its_best_peer():
    data = host_answer(count=4, name="NVIDIA RTX 6000 Ada Generation")
    data["gpus"][2]["bf16_tflops"] = 100.0
    for gpu in data["gpus"][:2] + data["gpus"][3:]:
        gpu["bf16_tflops"] = 180.0
    result = judge("gpu.matmul_consistency", data)
    assert result["status"] == "FAIL" and "the best NVIDIA RTX 6000 Ada Generation on this host" in result["message"]


def test_a_matmul_that_raised_fails_naming_the_gpu():
    data = host_answer(count=2)
    data["gpus"][1]["consistency"] = {"error": "RuntimeError: CUDA error: an illegal memory access was encountered"}
    result = judge("gpu.matmul_consistency", data)
    assert result["status"] == "FAIL" and "GPU 1" in result["message"] and "illegal memory access" in result["message"]


def test_gpus_left_unmeasured_by_the_deadline_are_error_never_pass():
    data = host_answer(count=2)
    data["gpus"][1]["consistency"] = None
    data["gpus"][1]["bf16_tflops"] = None
    data["not_run"] = ["gpu 1 consistency", "gpu 1 bf16_tflops"]
    result = judge("gpu.matmul_consistency", data)
    assert result["status"] == "ERROR" and "gpu 1 consistency" in result["message"]


# ---------------------------------------------------------------- device memory

def test_device_memory_below_dcgm_fraction_fails():
    data = host_answer()
    data["gpus"][6]["memory_bandwidth_gbps"] = 1800.0  # below 0.75 x 2540
    result = judge("gpu.memory_bandwidth", data)
    assert result["status"] == "FAIL" and result["message"].startswith("GPU 6 ") and "below 0.75 x 2540 GB/s" in result["message"]
    assert judge("gpu.memory_bandwidth", data, expect={"gpu_memory_bandwidth_min_fraction": 0.7})["status"] == "PASS"


def test_a_single_unknown_gpu_is_measured_but_not_judged():
    result = judge("gpu.memory_bandwidth", host_answer(count=1, name="NVIDIA GeForce RTX 4090"))
    assert result["status"] == "PASS" and "1 GPU(s) measured with no figure to compare with" in result["message"]


# ---------------------------------------------------------------- PCIe under load

def test_x8_of_x16_under_load_fails_unless_the_inventory_says_8():
    data = host_answer(count=2)
    data["gpus"][1]["pcie"]["link_under_load"]["width_min"] = 8
    data["gpus"][1]["pcie"].update(h2d_gbps=27.4, d2h_gbps=26.9)
    result = judge("gpu.pcie_under_load", data)
    assert result["status"] == "FAIL"
    assert "GPU 1 0000:19:00.0 GPU-00000001-0000-0000-0000-000000000000: PCIe link x8 of x16 under load (set pcie_width: 8 for a x8 slot)" in result["message"]
    # Told the slot is x8: the width is right, and the copies are judged against x8's 31.5 GB/s.
    assert judge("gpu.pcie_under_load", data, expect={"pcie_width": 8})["status"] == "PASS"


def test_a_link_that_stays_at_a_lower_generation_under_load_fails():
    data = host_answer(count=1)
    data["gpus"][0]["pcie"]["link_under_load"]["gen_min"] = 3
    result = judge("gpu.pcie_under_load", data)
    assert result["status"] == "FAIL" and "PCIe link Gen3 of Gen5 under load" in result["message"]


def test_slow_pinned_copies_fail_against_the_link_rate():
    data = host_answer(count=1)
    data["gpus"][0]["pcie"]["d2h_gbps"] = 20.0  # 0.32 of Gen5 x16's 63 GB/s
    result = judge("gpu.pcie_under_load", data)
    assert result["status"] == "FAIL" and "pinned copies 20.0 GB/s (slower direction), below 0.6 x 63.0 GB/s of Gen5 x16" in result["message"]


def test_a_link_unreadable_under_load_warns():
    data = host_answer(count=1)
    data["gpus"][0]["pcie"]["link_under_load"] = {"samples": 0, "gen_min": None, "width_min": None, "gen_max": None, "width_max": None}
    result = judge("gpu.pcie_under_load", data)
    assert result["status"] == "WARN" and "not readable under load" in result["message"]


# ---------------------------------------------------------------- all-reduce

def test_allreduce_with_one_gpu_is_skip():
    result = judge("gpu.allreduce_local", host_answer(count=1))
    assert result["status"] == "SKIP" and "at least two" in result["message"]


def test_allreduce_below_the_nvlink_figure_fails():
    data = host_answer()
    data["allreduce"].update(busbw_gbps=120.0, algbw_gbps=68.6)  # an NVLink down: traffic over PCIe
    result = judge("gpu.allreduce_local", data)
    assert result["status"] == "FAIL" and "below 0.75 x 370 GB/s expected (H100 SXM NVLink ring" in result["message"]
    assert judge("gpu.allreduce_local", data, expect={"allreduce_busbw_gbps": 150})["status"] == "PASS"


def test_pcie_only_gpus_are_judged_against_the_link_rate():
    data = host_answer(count=2, name="NVIDIA L4")
    data["allreduce"]["busbw_gbps"] = 12.0
    result = judge("gpu.allreduce_local", data)
    assert result["status"] == "FAIL" and "the slowest GPU's PCIe one-way link rate" in result["message"]


def test_allreduce_that_raised_fails():
    data = host_answer(count=2)
    data["allreduce"] = {"error": "RuntimeError: NCCL error: unhandled system error"}
    result = judge("gpu.allreduce_local", data)
    assert result["status"] == "FAIL" and "NCCL error" in result["message"]


# ---------------------------------------------------------------- host memory bandwidth

def memory_data(triad, c_triad=None, reason=None):
    return {"numpy": {"status": "ok", "method": "numpy_blocked", "threads": 1, "triad_gbps": triad, "copy_gbps": triad * 1.2},
            "c_reference": None if c_triad is None else {"triad_gbps": c_triad, "threads": 1, "openmp": True},
            "c_reference_reason": reason, "array_bytes": 134217728, "llc_bytes": 33554432, "notes": []}


def test_host_memory_is_judged_against_the_c_reference():
    passed = judge("system.memory_bandwidth", memory_data(28.3, 33.3))
    assert passed["status"] == "PASS" and "0.85 x the compiled-C triad 33.3 GB/s" in passed["message"]
    # NumPy's unfused triad reaches 0.7-0.95x of C on healthy hosts: 0.72 (one core here) is no fault.
    assert judge("system.memory_bandwidth", memory_data(24.0, 33.3))["status"] == "PASS"
    failed = judge("system.memory_bandwidth", memory_data(15.0, 33.3))
    assert failed["status"] == "FAIL" and failed["message"].endswith("below 0.5")
    assert judge("system.memory_bandwidth", memory_data(15.0, 33.3), {"host_memory_bandwidth_min_fraction": 0.4})["status"] == "PASS"


def test_a_slow_memory_fails_even_where_numpy_keeps_up_with_c():
    failed = judge("system.memory_bandwidth", memory_data(7.5, 8.0))
    assert failed["status"] == "FAIL" and failed["message"].endswith("both below memory_triad_gbps_min 10 GB/s")
    assert judge("system.memory_bandwidth", memory_data(7.5, 8.0), {"memory_triad_gbps_min": 5})["status"] == "PASS"


def test_a_one_thread_c_reference_is_not_the_memorys_floor():
    # A compiler without OpenMP: C on one thread (9 GB/s) under NumPy on every CPU (40 GB/s) is not a slow memory.
    assert judge("system.memory_bandwidth", memory_data(40.0, 9.0))["status"] == "PASS"


def test_without_a_compiler_host_memory_is_judged_against_the_class_floor():
    result = judge("system.memory_bandwidth", memory_data(8.0, reason="no C compiler (cc, gcc, clang) on PATH"))
    assert result["status"] == "FAIL" and "no C reference (no C compiler" in result["message"]
    assert "below memory_triad_gbps_min 10" in result["message"]
    assert judge("system.memory_bandwidth", memory_data(12.0, reason="none"))["status"] == "PASS"


def test_no_numpy_is_skip():
    result = judge("system.memory_bandwidth", envelope={"status": "absent", "data": None,
                                                        "reason": "NumPy is not importable by /usr/bin/python3: No module named 'numpy'"})
    assert result["status"] == "SKIP" and "NumPy is not importable" in result["message"]


def test_the_checks_do_not_change_their_input():
    data = host_answer()
    before = copy.deepcopy(data)
    for check_id in GPU_CHECKS:
        judge(check_id, data)
    assert data == before


# ---------------------------------------------------------------- adversarial: NaN figures, a GPU the worker left out

def _smi(count):
    """nvidia-smi's view of the same host (its spellings: GPU- UUIDs, 8-digit PCI domain)."""
    return {"gpus": [{"index": i, "name": H100, "uuid": "GPU-%08d-0000-0000-0000-000000000000" % i,
                      "pci_bus_id": "00000000:%02X:00.0" % (0x18 + i)} for i in range(count)]}


@pytest.mark.parametrize("check_id, edit, status", [
    ("gpu.matmul_consistency", lambda g: g["consistency"]["fp32"].update(max_rel_error=float("nan")), "FAIL"),
    ("gpu.matmul_consistency", lambda g: g["consistency"]["bf16"].update(max_rel_error=float("inf")), "FAIL"),
    ("gpu.matmul_consistency", lambda g: g.update(bf16_tflops=float("nan")), "ERROR"),
    ("gpu.memory_bandwidth", lambda g: g.update(memory_bandwidth_gbps=float("nan")), "ERROR"),
    ("gpu.memory_bandwidth", lambda g: g.update(memory_bandwidth_gbps=float("inf")), "ERROR"),
    ("gpu.pcie_under_load", lambda g: g["pcie"].update(h2d_gbps=float("nan")), "ERROR"),
])
def test_a_nan_or_infinite_figure_is_never_a_pass(check_id, edit, status):
    data = host_answer()
    edit(data["gpus"][3])
    result = judge(check_id, data)
    assert result["status"] == status and "GPU 3" in result["message"], result["message"]


def test_an_allreduce_with_a_nan_bus_bandwidth_is_error_not_pass():
    data = host_answer()
    data["allreduce"]["busbw_gbps"] = float("nan")
    result = judge("gpu.allreduce_local", data)
    assert result["status"] == "ERROR" and "measured no bus bandwidth" in result["message"]
    data["allreduce"]["busbw_gbps"] = None
    assert judge("gpu.allreduce_local", data, expect={"allreduce_busbw_gbps": 0.0})["status"] == "ERROR"


@pytest.mark.parametrize("check_id", GPU_CHECKS)
def test_a_gpu_nvidia_smi_lists_but_the_worker_left_out_is_never_a_pass(check_id):
    data = host_answer(count=8)
    assert judge(check_id, data, smi=_smi(8))["status"] == "PASS"
    del data["gpus"][5]  # torch saw 7 of the 8 GPUs
    result = judge(check_id, data, smi=_smi(8))
    assert result["status"] == "ERROR", result["message"]
    assert "GPU 5 00000000:1D:00.0 GPU-00000005-0000-0000-0000-000000000000: listed by nvidia-smi, not measured by the worker" in result["message"]
    assert "torch saw 7 of 8 GPUs" in result["message"]


def test_a_gpu_left_out_is_found_by_count_when_the_worker_names_no_uuid_or_bus():
    data = host_answer(count=2)
    for gpu in data["gpus"]:
        gpu.update(uuid=None, pci_bus_id=None)
    assert judge("gpu.memory_bandwidth", data, smi=_smi(2))["status"] == "PASS"
    result = judge("gpu.memory_bandwidth", data, smi=_smi(3))
    assert result["status"] == "ERROR" and "GPU 2 00000000:1A:00.0 GPU-00000002" in result["message"]

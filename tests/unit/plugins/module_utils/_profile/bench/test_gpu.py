"""GPU benchmark: worker answers, per-GPU failures and timeouts, torch absent; the real torch path is marked gpu."""

import importlib.util
import os
import sys

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import worker as _worker
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import gpu

# What _torch_worker prints for one GPU (values as an H100 SXM gives them; shape is what is tested).
ANSWER_LINE = ('{"status": "ok", "index": 0, "name": "NVIDIA H100 80GB HBM3", "torch_version": "2.5.1+cu124", '
               '"matrix_n": 8192, "transfer_bytes": 268435456, "bf16_tflops": 741.2345, "fp16_tflops": 752.11, '
               '"fp32_tflops": 51.377, "h2d_gbps": 53.219, "d2h_gbps": 52.804, "memory_bandwidth_gbps": 2874.551, "notes": []}')
INVENTORY = {"status": "ok", "torch_version": "2.5.1", "cuda_available": True, "cuda_version": "12.4",
             "devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}, {"index": 1, "name": "NVIDIA H100 80GB HBM3"}]}


def test_worker_answer_becomes_a_gpu_entry_with_units_in_names():
    entry = gpu.gpu_entry(_worker.parse_answer(0, "loading...\n" + ANSWER_LINE + "\n", "", "gpu 0 benchmark"))
    assert entry == {"index": 0, "name": "NVIDIA H100 80GB HBM3", "status": "ok", "message": None, "bf16_tflops": 741.23,
                     "fp16_tflops": 752.11, "fp32_tflops": 51.38, "h2d_gbps": 53.22, "d2h_gbps": 52.8,
                     "memory_bandwidth_gbps": 2874.55, "matrix_n": 8192, "notes": []}


def test_skipped_without_torch():
    result = gpu.run_gpu(0.1, 0.1, inventory={"status": "absent", "reason": "torch is not importable by /usr/bin/python3"})
    assert result["status"] == "skipped" and result["gpus"] == []
    assert result["message"] == "torch is not importable by /usr/bin/python3"
    result = gpu.run_gpu(0.1, 0.1, inventory={"status": "ok", "torch_version": "2.5.1+cpu", "cuda_available": False, "devices": []})
    assert result["status"] == "skipped" and result["message"] == "torch 2.5.1+cpu sees no CUDA device"


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed here")
def test_real_inventory_without_torch_is_absent_not_an_error():
    answer = gpu.torch_inventory()
    assert answer["status"] == "absent" and "torch is not importable by %s" % sys.executable in answer["reason"]


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed here")
def test_each_gpu_fails_alone_with_its_reason():
    result = gpu.run_gpu(0.1, 0.1, inventory=INVENTORY)
    assert result["status"] == "error"
    assert result["message"].startswith("0 of 2 GPUs measured; GPU 0: torch is not importable")
    assert [(entry["index"], entry["status"], entry["bf16_tflops"]) for entry in result["gpus"]] == [(0, "error", None), (1, "error", None)]
    assert all(len(entry["_window"]) == 2 for entry in result["gpus"])


def test_a_hung_gpu_worker_times_out(tmp_path):
    hung = tmp_path / "python"
    hung.write_text("#!/bin/sh\nexec sleep 600\n")
    hung.chmod(0o755)
    result = gpu.run_gpu(0.1, 0.1, python=str(hung), inventory=dict(INVENTORY, devices=INVENTORY["devices"][:1]), timeout_s=0.5)
    (entry,) = result["gpus"]
    assert entry["status"] == "error" and entry["message"] == "gpu 0 benchmark timed out after 0.5s"


@pytest.mark.gpu
def test_real_torch_benchmark_on_every_gpu():
    result = gpu.run_gpu(0.5, 1.0, matrix_n=4096, transfer_mib=64, device_copy_mib=256, repeats=3)
    assert result["status"] == "ok", result["message"]
    for entry in result["gpus"]:
        assert entry["fp16_tflops"] > 0 and entry["fp32_tflops"] > 0
        assert entry["h2d_gbps"] > 0 and entry["d2h_gbps"] > 0 and entry["memory_bandwidth_gbps"] > 0
    assert os.path.exists("/dev/nvidiactl")

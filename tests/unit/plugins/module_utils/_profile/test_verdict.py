"""The per-host bottleneck verdict on constructed measurements: each planted problem gives an exact verdict."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._expect import problems as invalid_expectations
from ansible_collections.continuum.hydra.plugins.module_utils._profile import verdict as analysis

H100 = "NVIDIA H100 80GB HBM3"


def telemetry(reasons=(), temperature=68.0, sm_busy=1950.0, sm_max=1980.0, gen=5, width=16, gen_max=5, power=640.0):
    return {"throttle_reasons": list(reasons), "temperature_max_c": temperature, "sm_clock_busy_mean_mhz": sm_busy,
            "sm_clock_max_mhz": sm_max, "pcie_gen_busy_min": gen, "pcie_width_busy_min": width, "pcie_gen_max": gen_max,
            "pcie_width_max": 16, "power_max_w": power}


def gpu(index=0, name=H100, bf16=780.0, fp16=790.0, h2d=54.0, d2h=53.5, memory=2900.0, tele=None, status="ok"):
    return {"index": index, "name": name, "status": status, "bf16_tflops": bf16, "fp16_tflops": fp16, "fp32_tflops": 50.0,
            "h2d_gbps": h2d, "d2h_gbps": d2h, "memory_bandwidth_gbps": memory,
            "telemetry": telemetry() if tele is None else tele}


def benchmarks(gpus=None, triad=80.0, iops=20000.0, p99=120.0, seq_read=1500.0, fs="ext4", o_direct=True, cpu=None):
    return {
        "cpu_sustained": cpu or {"status": "ok", "method": "numpy_matmul", "matrix_n": 2048, "threads": 64,
                                 "single_thread_gflops": 60.0, "all_cores_gflops": 2800.0, "scaling_x": 46.7},
        "memory_bandwidth": {"status": "ok", "method": "numpy_blocked", "triad_gbps": triad, "copy_gbps": triad, "threads": 64},
        "disk_random_io": {"status": "ok" if o_direct else "fallback", "o_direct": o_direct, "directory": "/data",
                           "filesystem_type": fs, "read_iops": iops, "read_latency_us": {"p99": p99}, "seq_read_mbps": seq_read},
        "gpu_sustained": {"status": "ok", "gpus": gpus if gpus is not None else [gpu(i) for i in range(8)]},
    }


def verdict(bench, static=None, expect=None):
    result, remediation = analysis.analyze(static or {"gpus": []}, bench, expect)
    return result["primary_bottleneck"], result["secondary_bottleneck"], result, remediation


def test_healthy_h100_host_has_no_bottleneck():
    primary, secondary, result, remediation = verdict(benchmarks())
    assert (primary, secondary) == (None, None)
    assert result["reasons"] == [] and result["benchmarks_measured"] == 4
    assert result["confidence"] == 0.7  # 0.3 + 0.1 per measured benchmark family
    assert remediation == {"priority": "low", "actions": []}


def test_thermally_throttled_gpu():
    hot = gpu(3, bf16=600.0, tele=telemetry(reasons=["hw_thermal_slowdown"], temperature=91.0, sm_busy=1410.0))
    primary, secondary, result, remediation = verdict(benchmarks([gpu(0), gpu(1), gpu(2), hot]))
    assert (primary, secondary) == ("gpu_thermal", None)
    # thermal slowdown 0.9, plus the bf16 shortfall it explains: 0.9 + 0.05.
    assert result["scores"] == {"gpu_thermal": 0.95}
    assert result["confidence"] == 0.95
    assert result["reasons"][0] == ("GPU 3 (NVIDIA H100 80GB HBM3): hw_thermal_slowdown under load, up to 91.0 C; "
                                    "SM clock 1410 of 1980 MHz while busy")
    assert "bf16 600.0 TFLOP/s is below the floor 715.1 = 0.9x the H100 SXM best measured 794.5" in result["reasons"][1]
    assert remediation["priority"] == "high"
    assert remediation["actions"][0]["title"] == "Fix GPU cooling" and remediation["actions"][0]["bottleneck"] == "gpu_thermal"


def test_slow_disk():
    primary, secondary, result, _remediation = verdict(benchmarks(iops=300.0, p99=25000.0, seq_read=90.0))
    assert (primary, secondary) == ("disk_io", None)
    assert result["scores"] == {"disk_io": 1.0}
    # Every finding scores 1.0 (at or beyond half its floor): equal scores list in reason order.
    assert result["reasons"] == [
        "4 KiB random reads in /data: 300 IOPS, below the floor 1000",
        "4 KiB read p99 latency in /data: 25000 us, above 10000 us",
        "sequential read in /data: 90 MB/s, below the floor 200",
    ]


def test_memory_bound_host():
    primary, secondary, result, remediation = verdict(benchmarks(triad=6.0))
    assert (primary, secondary) == ("memory_bandwidth", None)
    assert result["scores"] == {"memory_bandwidth": 0.9}  # 0.5 + (1 - 6/10)
    assert remediation["actions"][0]["title"] == "Populate every memory channel evenly"


def test_narrowed_link_under_load():
    narrow = gpu(5, h2d=20.0, d2h=21.0, tele=telemetry(gen=4, width=8))
    primary, secondary, result, _remediation = verdict(benchmarks([gpu(0), narrow]))
    assert (primary, secondary) == ("gpu_host_link", None)
    assert result["reasons"][0] == ("GPU 5 (NVIDIA H100 80GB HBM3): pinned copies H2D 20.0 / D2H 21.0 GB/s, below the floor "
                                    "50.4 = 0.8x the Gen5 x16 rate 63.0 GB/s")
    assert result["reasons"][1] == "GPU 5 (NVIDIA H100 80GB HBM3): PCIe link Gen4 x8 under load, capable of Gen5 x16"


def test_narrow_width_read_at_idle_when_no_telemetry():
    static = {"gpus": [{"index": 0, "pcie": {"gen_current": 1, "gen_max": 4, "width_current": 8, "width_max": 16}}]}
    entry = gpu(0, name="NVIDIA A100-SXM4-80GB", bf16=260.0, h2d=24.0, d2h=24.5, memory=1500.0, tele={})
    primary, _secondary, result, _remediation = verdict(benchmarks([entry]), static)
    # gen 1 at idle is power saving, not a fault; width x8 is.
    assert primary == "gpu_host_link"
    assert "PCIe link width x8 of x16 (read at idle)" in result["reasons"][0]


def test_power_capped_gpu_below_reference_is_a_power_bottleneck():
    capped = gpu(0, bf16=650.0, tele=telemetry(reasons=["sw_power_cap"], sm_busy=1500.0, power=700.0))
    primary, secondary, result, _remediation = verdict(benchmarks([capped]))
    assert (primary, secondary) == ("gpu_power", None)
    assert result["scores"]["gpu_power"] == 0.85


def test_power_cap_alone_with_throughput_on_target_is_no_verdict():
    capped = gpu(0, bf16=780.0, tele=telemetry(reasons=["sw_power_cap"], power=700.0))
    primary, _secondary, result, _remediation = verdict(benchmarks([capped]))
    assert primary is None
    assert result["reasons"] == ["GPU 0 (NVIDIA H100 80GB HBM3): sw_power_cap under load at 700.0 W, throughput within expectations"]


def test_lowered_power_limit_from_the_static_profile():
    static = {"gpus": [{"index": 0, "power": {"limit_w": 500.0, "default_limit_w": 700.0}}]}
    primary, _secondary, result, _remediation = verdict(benchmarks([gpu(0)]), static)
    assert primary == "gpu_power"
    assert result["reasons"] == ["GPU 0 (NVIDIA H100 80GB HBM3): power limit 500 W is below the default 700 W"]


def test_slow_gpu_without_throttle_reason_is_compute():
    a100 = gpu(0, name="NVIDIA A100-SXM4-80GB", bf16=200.0, h2d=26.0, d2h=26.2, memory=1600.0,
               tele=telemetry(sm_busy=1400.0, sm_max=1410.0, gen=4, gen_max=4))
    primary, _secondary, result, _remediation = verdict(benchmarks([a100]))
    assert primary == "gpu_compute"
    assert result["reasons"] == ["GPU 0 (NVIDIA A100-SXM4-80GB): bf16 200.0 TFLOP/s is below the floor 244.1 = 0.9x the A100 SXM "
                                 "best measured 271.2"]


def test_low_sm_clock_without_reason_is_a_clock_bottleneck():
    slow = gpu(0, bf16=700.0, tele=telemetry(sm_busy=1200.0))
    primary, _secondary, result, _remediation = verdict(benchmarks([slow]))
    assert primary == "gpu_clocks"
    assert result["scores"] == {"gpu_clocks": 0.65}  # low clock 0.6, plus the bf16 shortfall it explains


def test_inventory_expectation_overrides_the_sku_table():
    assert verdict(benchmarks([gpu(0, bf16=780.0)]))[0] is None
    primary, _secondary, result, _remediation = verdict(benchmarks([gpu(0, bf16=780.0)]), expect={"gpu_bf16_tflops_min": 800})
    assert primary == "gpu_compute"
    assert result["reasons"] == ["GPU 0 (NVIDIA H100 80GB HBM3): bf16 780.0 TFLOP/s is below the floor hydra_expect gpu_bf16_tflops_min"]


def test_unknown_gpu_model_is_reported_not_judged():
    primary, _secondary, result, _remediation = verdict(benchmarks([gpu(0, name="Tesla T4", bf16=20.0, h2d=3.0, d2h=3.0, memory=200.0, tele={})]))
    assert primary is None
    assert result["notes"] == ["GPU 0 (Tesla T4): no SKU reference and no gpu_bf16_tflops_min: matmul figures reported, not judged"]


def test_volta_is_judged_on_fp16():
    v100 = gpu(0, name="Tesla V100-SXM2-32GB", bf16=None, fp16=60.0, h2d=12.0, d2h=12.5, memory=800.0, tele=telemetry(gen=3, gen_max=3))
    primary, _secondary, result, _remediation = verdict(benchmarks([v100]))
    assert primary == "gpu_compute"
    assert "fp16 60.0 TFLOP/s is below the floor 90.0 = 0.9 x 0.8 x the V100 datasheet 125.0" in result["reasons"][0]


def test_thermal_gpu_and_slow_disk_rank_primary_and_secondary():
    hot = gpu(2, bf16=610.0, tele=telemetry(reasons=["sw_thermal_slowdown"], temperature=88.0, sm_busy=1500.0))
    primary, secondary, result, remediation = verdict(benchmarks([gpu(0), hot], iops=800.0))
    assert (primary, secondary) == ("gpu_thermal", "disk_io")
    assert [action["bottleneck"] for action in remediation["actions"]] == ["gpu_thermal", "gpu_thermal", "disk_io", "disk_io"]
    assert result["recommendations"][0] == "Fix GPU cooling"


def test_memory_file_system_and_buffered_reads_are_not_judged():
    primary, _secondary, result, _remediation = verdict(benchmarks(iops=50.0, fs="tmpfs"))
    assert primary is None and result["notes"] == ["disk not judged: /data is a memory file system"]
    primary, _secondary, result, _remediation = verdict(benchmarks(iops=50.0, o_direct=False))
    assert primary is None and result["notes"] == ["disk not judged: /data is read without O_DIRECT"]


def test_powersave_governor_and_poor_scaling_point_at_the_cpu():
    cpu = {"status": "ok", "method": "numpy_matmul", "matrix_n": 2048, "threads": 32, "single_thread_gflops": 50.0,
           "all_cores_gflops": 150.0, "scaling_x": 3.0}
    primary, _secondary, result, _remediation = verdict(benchmarks(cpu=cpu), static={"gpus": [], "cpu": {"governors": ["powersave"]}})
    assert primary == "cpu_compute"
    assert result["reasons"] == ["all-core matmul is 3.00x one thread on 32 CPUs: CPUs shared or throttled",
                                 "CPU frequency governor is powersave"]
    small = dict(cpu, matrix_n=256)  # small matrices never scale: not evidence
    assert verdict(benchmarks(cpu=small))[0] is None


def test_failed_gpu_entries_are_not_judged():
    primary, _secondary, result, _remediation = verdict(benchmarks([gpu(0, bf16=None, status="error")]))
    assert primary is None and result["findings"] == []


@pytest.mark.parametrize("name, sku", [
    ("NVIDIA GH200 480GB", "gh200"), ("NVIDIA H200", "h200"), ("NVIDIA H100 PCIe", "h100_pcie"), (H100, "h100_sxm"),
    ("NVIDIA A100-SXM4-40GB", "a100_sxm"), ("NVIDIA A100 80GB PCIe", "a100_pcie"), ("NVIDIA A100-PCIE-40GB", "a100_pcie"),
    ("NVIDIA L40S", "l40s"), ("Tesla V100-SXM2-32GB", "v100"), ("Tesla T4", None),
])
def test_sku_matching_of_product_names(name, sku):
    assert (analysis.find_sku(name) or {}).get("id") == sku


def test_explicit_sku_and_link_rates():
    assert analysis.find_sku("anything", "l40s")["label"] == "L40S"
    assert analysis.link_rate_gbps(4, 16) == pytest.approx(31.5, abs=0.01)
    assert analysis.link_rate_gbps(5, 16) == pytest.approx(63.0, abs=0.01)
    assert analysis.link_rate_gbps(None, 16) is None


def test_profile_expectations_are_declared_and_typed():
    assert invalid_expectations({"gpu_bf16_tflops_min": 700, "disk_read_iops_min": 5000}) == []
    assert invalid_expectations({"memory_triad_gbps_min": "fast"}) == ["expect.memory_triad_gbps_min: 'fast' is not a number"]

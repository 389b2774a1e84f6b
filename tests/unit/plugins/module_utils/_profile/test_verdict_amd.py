"""Vendor-correct recommended actions: amd-smi for AMD GPUs, nvidia-smi for NVIDIA ones, both for a mixed host."""

from ansible_collections.continuum.hydra.plugins.module_utils._profile import verdict as analysis

MI300X = "AMD Instinct MI300X"
H100 = "NVIDIA H100 80GB HBM3"


def gpu(index, name, bf16, sm_busy, sm_max):
    telemetry = {"throttle_reasons": [], "temperature_max_c": 68.0, "sm_clock_busy_mean_mhz": sm_busy, "sm_clock_max_mhz": sm_max,
                 "pcie_gen_busy_min": 5, "pcie_width_busy_min": 16, "pcie_gen_max": 5, "pcie_width_max": 16, "power_max_w": 600.0}
    return {"index": index, "name": name, "status": "ok", "bf16_tflops": bf16, "fp16_tflops": bf16, "fp32_tflops": 50.0,
            "h2d_gbps": 54.0, "d2h_gbps": 53.5, "memory_bandwidth_gbps": 4000.0, "telemetry": telemetry}


def slow_clock(index, name):
    return gpu(index, name, 700.0, 1200.0, 2100.0 if name == MI300X else 1980.0)


def remediation(gpus, static_gpus):
    result, remediation = analysis.analyze({"gpus": static_gpus}, {"gpu_sustained": {"status": "ok", "gpus": gpus}})
    return result, remediation["actions"]


def amd(index, **fields):
    return dict({"index": index, "vendor": "amd"}, **fields)


def test_amd_power_cap_advice_names_amd_smi():
    result, actions = remediation([gpu(0, MI300X, 1000.0, 2000.0, 2100.0)],
                                  [amd(0, power={"limit_w": 500.0, "default_limit_w": 750.0})])
    assert result["primary_bottleneck"] == "gpu_power"
    power = [a for a in actions if a["bottleneck"] == "gpu_power"]
    assert power[0]["title"] == "Restore the default GPU power cap"
    assert "amd-smi reset --gpu <index> --power-cap" in power[0]["reason"]
    assert "amd-smi set --gpu <index> --power-cap <watts>" in power[0]["reason"]
    assert not any("nvidia-smi" in a["reason"] for a in actions)


def test_amd_clock_advice_names_amd_smi_and_drops_persistence_mode():
    result, actions = remediation([slow_clock(0, MI300X)], [amd(0)])
    assert result["primary_bottleneck"] == "gpu_clocks"
    clocks = [(a["title"], a["reason"]) for a in actions if a["bottleneck"] == "gpu_clocks"]
    assert clocks == [("Reset clocks and overdrive", "GFX clocks stayed low under load (amd-smi reset --gpu <index> --clocks).")]


def test_nvidia_advice_is_unchanged():
    result, actions = remediation([slow_clock(0, H100)], [{"index": 0}])
    assert result["primary_bottleneck"] == "gpu_clocks"
    assert [a["title"] for a in actions if a["bottleneck"] == "gpu_clocks"] == [
        "Reset application clocks and clock locks", "Enable persistence mode"]
    assert "nvidia-smi -rac / -rgc" in actions[0]["reason"] and "amd-smi" not in actions[0]["reason"]


def test_mixed_host_gives_the_nvidia_text_then_the_amd_one():
    _result, actions = remediation([slow_clock(0, H100), slow_clock(1, MI300X)], [{"index": 0}, amd(1)])
    clocks = [a for a in actions if a["bottleneck"] == "gpu_clocks"]
    assert clocks[0]["title"] == "Reset application clocks and clock locks"
    assert clocks[0]["reason"] == ("SM clocks stayed low under load (nvidia-smi -rac / -rgc). On the AMD GPUs: GFX clocks stayed "
                                   "low under load (amd-smi reset --gpu <index> --clocks).")
    assert clocks[1]["title"] == "Enable persistence mode"  # for the NVIDIA GPUs


def test_actions_for_each_vendor_set():
    nvidia = analysis.actions_for("gpu_compute", ["nvidia"])
    assert nvidia[0][0] == "Run doctor and dcgmi diag on the GPU"
    assert analysis.actions_for("gpu_compute", ["amd"])[0][0] == "Run doctor and the ROCm Validation Suite (rvs) on the GPU"
    assert analysis.actions_for("gpu_compute", []) == nvidia
    assert analysis.actions_for("disk_io", ["amd"]) == analysis.actions_for("disk_io", ["nvidia"])  # no GPU tool named

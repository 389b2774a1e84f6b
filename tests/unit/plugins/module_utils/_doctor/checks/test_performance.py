"""The PCIe link, clock, temperature and power checks on recorded nvidia-smi output, faults planted by editing
copies of the recordings."""

from ansible_collections.continuum.hydra.tests.support.nvidia import A100_UUID, T4_UUID, judge, named, smi


def test_x8_of_x16_fails_on_a_busy_gpu_and_warns_at_idle():
    idle = judge("gpu.pcie_link", smi("tesla-t4.xml"))
    assert idle["status"] == "WARN" and "x8 of x16 at idle: re-check under load" in idle["message"]
    busy = judge("gpu.pcie_link", smi("tesla-t4.xml", ("utilization/gpu_util", "85 %")))
    assert busy["status"] == "FAIL" and "x8 of x16 while busy (85 %)" in busy["message"]
    assert named(busy) == [(0, T4_UUID)]
    assert judge("gpu.pcie_link", smi("tesla-t4.xml", ("utilization/gpu_util", "85 %")), {"pcie_width": 8})["status"] == "PASS"


def test_a_lowered_generation_is_judged_only_under_load():
    assert judge("gpu.pcie_link", smi("rtx-4000-sff-ada-v13.xml"))["status"] == "PASS"  # gen 1 of 4 at idle
    busy = judge("gpu.pcie_link", smi("rtx-4000-sff-ada-v13.xml", ("utilization/gpu_util", "50 %")))
    assert busy["status"] == "FAIL" and "gen 1 of 4" in busy["message"]
    assert judge("gpu.pcie_link", smi("rtx-4000-sff-ada-v13.xml", ("utilization/gpu_util", "5 %")),
                 {"gpu_busy_util_pct": 1})["status"] == "FAIL"


def test_thermal_throttle_warns_power_brake_and_hw_slowdown_fail():
    reason = "clocks_event_reasons/clocks_event_reason_%s"
    thermal = judge("gpu.clock_throttle_reasons", smi("a100-sxm4-v12.xml", (reason % "hw_thermal_slowdown", "Active")))
    assert thermal["status"] == "WARN" and "hw_thermal_slowdown" in thermal["message"]
    assert named(thermal) == [(0, A100_UUID)]
    brake = judge("gpu.clock_throttle_reasons", smi("a100-sxm4-v12.xml", (reason % "hw_power_brake_slowdown", "Active")))
    assert brake["status"] == "FAIL"
    assert judge("gpu.clock_throttle_reasons", smi("a100-sxm4-v12.xml", (reason % "hw_slowdown", "Active")))["status"] == "FAIL"
    assert judge("gpu.clock_throttle_reasons", smi("a100-sxm4-v12.xml", (reason % "hw_slowdown", "Active"),
                                                   (reason % "hw_thermal_slowdown", "Active")))["status"] == "WARN"
    older = "clocks_throttle_reasons/clocks_throttle_reason_sw_thermal_slowdown"
    assert judge("gpu.clock_throttle_reasons", smi("tesla-t4.xml", (older, "Active")))["status"] == "WARN"
    assert judge("gpu.clock_throttle_reasons", smi("tesla-t4.xml", (reason.replace("event", "throttle") % "sw_power_cap",
                                                                    "Active")))["status"] == "PASS"


def test_temperature_against_the_gpus_own_thresholds():
    assert judge("gpu.temperature", smi("a100-sxm4-v12.xml", ("temperature/gpu_temp", "90 C")))["status"] == "FAIL"
    hot = judge("gpu.temperature", smi("a100-sxm4-v12.xml", ("temperature/gpu_temp", "86 C")))
    assert hot["status"] == "WARN" and "past its maximum operating temperature" in hot["message"]
    assert judge("gpu.temperature", smi("rtx-4000-sff-ada-v13.xml", ("temperature/gpu_temp_tlimit", "-3 C")))["status"] == "FAIL"
    assert judge("gpu.temperature", smi("a100-sxm4-v12.xml"), {"temperature_warn_c": 25})["status"] == "WARN"
    memory = judge("gpu.temperature", smi("a100-sxm4-v12.xml", ("temperature/memory_temp", "96 C")))
    assert memory["status"] == "WARN" and "memory 96 C" in memory["message"]


def test_power_capped_below_default_warns():
    record = judge("gpu.power", smi("a100-sxm4-v12.xml", ("gpu_power_readings/current_power_limit", "400.00 W")))
    assert record["status"] == "WARN" and "limit 400.0 W below the default 500.0 W" in record["message"]
    assert judge("gpu.power", smi("tesla-t4.xml", ("power_readings/enforced_power_limit", "60.00 W")))["status"] == "WARN"


def test_clocks_lowered_application_clocks_and_slow_busy_gpu():
    lowered = judge("gpu.clocks", smi("a100-sxm4-v12.xml", ("applications_clocks/graphics_clock", "1000 MHz")))
    assert lowered["status"] == "WARN" and "lowered to 1000 of the default 1275 MHz" in lowered["message"]
    slow = judge("gpu.clocks", smi("rtx-3080-v13.xml", ("clocks/sm_clock", "1000 MHz")))
    assert slow["status"] == "WARN" and "SM clock 1000 of 2100 MHz while busy (65 %)" in slow["message"]
    capped = smi("rtx-3080-v13.xml", ("clocks/sm_clock", "1000 MHz"),
                 ("clocks_event_reasons/clocks_event_reason_sw_power_cap", "Active"))
    assert judge("gpu.clocks", capped)["status"] == "PASS"


def test_pcie_replays_over_the_threshold_warn():
    assert judge("gpu.pcie_replay", smi("a100-sxm4-v12.xml", ("pci/replay_counter", "500")))["status"] == "WARN"
    assert judge("gpu.pcie_replay", smi("a100-sxm4-v12.xml", ("pci/replay_rollover_counter", "1")))["status"] == "WARN"
    assert judge("gpu.pcie_replay", smi("a100-sxm4-v12.xml", ("pci/replay_counter", "500")),
                 {"pcie_replay_warn": 1000})["status"] == "PASS"

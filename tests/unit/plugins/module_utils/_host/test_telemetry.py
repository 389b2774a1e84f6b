"""Telemetry under load: parsing recorded nvidia-smi sampler output, aggregation, NVML mapping, the live sampler."""

import datetime
import os
import re
import time

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host import telemetry
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path, read_fixture

RECORDING = ("nvidia-smi-query", "h100-pcie-350w-lms.csv")


def recorded_samples(text):
    """A recorded ``nvidia-smi --query-gpu=... --format=csv -lms N`` output -> [(t, row)] through the sampler's own row
    parser, t from its timestamps (seconds since the epoch), else the row's position."""
    lines = [line for line in text.splitlines() if line.strip()]
    columns = telemetry.parse_smi_header(lines[0])
    samples = []
    for position, line in enumerate(lines[1:]):
        row = telemetry.parse_smi_row(columns, line)
        if row is not None:
            stamp = (datetime.datetime.strptime(line.split(",")[0], "%Y/%m/%d %H:%M:%S.%f")
                     - datetime.datetime(1970, 1, 1)).total_seconds() if columns[0] == "timestamp" else float(position)
            samples.append((stamp, row))
    return samples


def plant_column(text, name, idle_value, busy_value):
    """Edit a copy of the recording: add a column, valued by whether the row is under load (100 %)."""
    lines = text.splitlines()
    out = [lines[0] + ", " + name]
    for line in lines[1:]:
        out.append(line + ", " + (busy_value if ", 100 %," in line else idle_value))
    return "\n".join(out) + "\n"


def test_recorded_h100_sampler_output_parses_every_row_with_units_stripped():
    samples = recorded_samples(read_fixture(*RECORDING))
    assert len(samples) == 58
    first_t, first = samples[0]
    assert first["index"] == 0  # no index column: the single recorded GPU
    assert (first["util_pct"], first["sm_clock_mhz"], first["mem_clock_mhz"], first["power_w"], first["temperature_c"]) == (
        0.0, 345.0, 1593.0, 46.83, 32.0)
    last_t, last = samples[-1]
    assert (last["util_pct"], last["sm_clock_mhz"], last["power_w"]) == (100.0, 1500.0, 272.65)
    assert round(last_t - first_t, 3) == 6.26  # 08:20:40.162 -> 08:20:46.422, from the recorded timestamps


def test_summary_of_the_recorded_load_window():
    samples = recorded_samples(read_fixture(*RECORDING))
    summary = telemetry.summarize([], samples, samples[0][0], samples[-1][0])
    assert summary["cpu"] == {"samples": 0, "util_mean_pct": None, "util_max_pct": None}
    (gpu,) = summary["gpus"]
    assert gpu["samples"] == 58 and gpu["busy_samples"] == 30
    assert gpu["util_mean_pct"] == 51.9  # (13 x 1 % + 30 x 100 %) / 58
    assert gpu["util_max_pct"] == 100.0
    assert gpu["power_max_w"] == 272.65 and gpu["temperature_max_c"] == 38.0
    assert gpu["sm_clock_min_mhz"] == 345.0 and gpu["sm_clock_busy_mean_mhz"] == 1500.0
    assert gpu["throttle_reasons"] == [] and gpu["pcie_gen_busy_min"] is None


def test_summary_window_excludes_samples_outside_it():
    samples = recorded_samples(read_fixture(*RECORDING))
    idle_end = samples[27][0]  # the last ramp row, before the load excerpt
    (gpu,) = telemetry.summarize([], samples, samples[0][0], idle_end)["gpus"]
    assert gpu["samples"] == 28 and gpu["busy_samples"] == 0
    assert gpu["util_max_pct"] == 1.0 and gpu["power_max_w"] == 51.1


def test_planted_thermal_throttle_under_load_is_reported_and_idle_reason_is_not():
    text = plant_column(read_fixture(*RECORDING), "clocks_throttle_reasons.active", "0x0000000000000001", "0x0000000000000044")
    samples = recorded_samples(text)
    (gpu,) = telemetry.summarize([], samples, samples[0][0], samples[-1][0])["gpus"]
    # 0x44 = sw_power_cap | hw_thermal_slowdown while busy; 0x1 (idle) only when idle, and gpu_idle is never a reason.
    assert gpu["throttle_reasons"] == ["hw_thermal_slowdown", "sw_power_cap"]


def test_newer_driver_header_name_for_throttle_reasons_is_understood():
    text = plant_column(read_fixture(*RECORDING), "clocks_event_reasons.active", "0x0000000000000000", "0x0000000000000020")
    (gpu,) = telemetry.summarize([], recorded_samples(text), 0, 1e12)["gpus"]
    assert gpu["throttle_reasons"] == ["sw_thermal_slowdown"]


def test_planted_narrowed_link_under_load():
    text = read_fixture(*RECORDING)
    text = plant_column(text, "pcie.link.gen.current", "1", "4")
    text = plant_column(text, "pcie.link.gen.max", "5", "5")
    text = plant_column(text, "pcie.link.width.current", "16", "8")
    text = plant_column(text, "pcie.link.width.max", "16", "16")
    (gpu,) = telemetry.summarize([], recorded_samples(text), 0, 1e12)["gpus"]
    # The idle downshift to gen 1 is ignored: only busy samples count.
    assert (gpu["pcie_gen_busy_min"], gpu["pcie_width_busy_min"], gpu["pcie_gen_max"], gpu["pcie_width_max"]) == (4, 8, 5, 16)


def test_not_supported_values_become_none():
    columns = telemetry.parse_smi_header("index, power.draw [W], clocks_throttle_reasons.active, memory.used [MiB]")
    row = telemetry.parse_smi_row(columns, "3, [N/A], [Not Supported], 1024 MiB")
    assert (row["index"], row["power_w"], row["throttle_mask"], row["memory_used_mib"]) == (3, None, None, 1024.0)
    row = telemetry.parse_smi_row(columns, "3, [Unknown Error], 0x4, ERR!")  # unreadable: no reading, still a sample
    assert (row["index"], row["power_w"], row["throttle_mask"], row["memory_used_mib"]) == (3, None, 4, None)
    assert telemetry.parse_smi_row(columns, "index, power.draw [W], x, y") is None  # a repeated header
    assert telemetry.parse_smi_row(columns, "3, 20 W") is None  # a short line


def test_decode_throttle_bits():
    assert telemetry.decode_throttle(0x4 | 0x40 | 0x80) == ["sw_power_cap", "hw_thermal_slowdown", "hw_power_brake_slowdown"]
    assert telemetry.decode_throttle(0) == [] and telemetry.decode_throttle(None) == []


def test_proc_stat_utilisation_from_the_real_file():
    with open("/proc/stat") as handle:
        before = telemetry.parse_proc_stat(handle.read())
    end = time.time() + 0.2
    while time.time() < end:
        pass  # keep one CPU busy
    with open("/proc/stat") as handle:
        after = telemetry.parse_proc_stat(handle.read())
    util = telemetry.cpu_util_pct(before, after)
    assert 0.0 < util <= 100.0
    assert telemetry.cpu_util_pct(before, before) is None
    with pytest.raises(ValueError):
        telemetry.parse_proc_stat("intr 1 2 3\n")


class FakeNvml:
    """Stands in for the driver library only (no GPU here); serves values from the recorded load row."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    class NVMLError(Exception):
        pass

    def __init__(self, row):
        self.row = row
        self.calls = []

    def __getattr__(self, name):
        raise AttributeError(name)

    def nvmlInit(self):
        self.calls.append("init")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetPciInfo(self, handle):
        return type("Pci", (), {"busId": b"00000000:%02X:00.0" % (handle + 1)})

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):
        return 1755

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        return 5

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        return 16

    def nvmlDeviceGetUtilizationRates(self, handle):
        return type("Util", (), {"gpu": int(self.row["util_pct"])})

    def nvmlDeviceGetMemoryInfo(self, handle):
        return type("Mem", (), {"used": 3 * 1024 ** 3})

    def nvmlDeviceGetPowerUsage(self, handle):
        return int(self.row["power_w"] * 1000)

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return int(self.row["temperature_c"])

    def nvmlDeviceGetClockInfo(self, handle, kind):
        return int(self.row["sm_clock_mhz"] if kind == self.NVML_CLOCK_SM else self.row["mem_clock_mhz"])

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return 0x4 if handle == 1 else 0x0

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        raise self.NVMLError("Not Supported")  # a field the GPU does not report stays None

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        return 16


def test_nvml_source_converts_units_and_tolerates_unsupported_calls():
    row = recorded_samples(read_fixture(*RECORDING))[-1][1]
    nvml = FakeNvml(row)
    source = telemetry.NvmlSource(nvml)
    source.open()
    rows = source.read()
    source.close()
    assert nvml.calls == ["init", "shutdown"]
    assert [r["index"] for r in rows] == [0, 1]
    assert rows[1]["pci_bus_id"] == "00000000:02:00.0"
    assert rows[0]["power_w"] == 272.65 and rows[0]["memory_used_mib"] == 3072.0  # mW -> W, bytes -> MiB
    assert rows[0]["sm_clock_mhz"] == 1500 and rows[0]["sm_clock_max_mhz"] == 1755
    assert rows[0]["pcie_gen"] is None and rows[0]["pcie_width"] == 16 and rows[0]["pcie_gen_max"] == 5
    assert telemetry.decode_throttle(rows[1]["throttle_mask"]) == ["sw_power_cap"]


def test_sampler_with_nvml_source_samples_cpu_and_gpus_in_the_background():
    row = recorded_samples(read_fixture(*RECORDING))[-1][1]
    source = telemetry.NvmlSource(FakeNvml(row))
    source.open()
    sampler = telemetry.Sampler(interval_s=0.02, gpu_source=source)
    start = time.monotonic()
    sampler.start()
    time.sleep(0.3)
    sampler.stop()
    summary = sampler.summary(start, time.monotonic())
    assert summary["cpu"]["samples"] >= 3
    assert [gpu["index"] for gpu in summary["gpus"]] == [0, 1]
    assert summary["gpus"][1]["throttle_reasons"] == ["sw_power_cap"]
    assert sampler.describe()["gpu_source"] == "nvml"


def write_fake_smi(tmp_path, recording_text):
    """A real long-lived process standing in for nvidia-smi -lms: replays the recording, one row per interval."""
    data = tmp_path / "recording.csv"
    data.write_text(recording_text)
    spawns = tmp_path / "spawns"
    script = tmp_path / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        "echo \"$$ $*\" >> %s\n"
        "head -n 1 %s\n"
        "tail -n +2 %s | while IFS= read -r line; do echo \"$line\"; sleep 0.01; done\n"
        "exec sleep 600\n" % (spawns, data, data))
    script.chmod(0o755)
    return str(script), spawns


def test_sampler_reads_one_long_lived_nvidia_smi_process(tmp_path):
    text = plant_column(read_fixture(*RECORDING), "clocks_throttle_reasons.active", "0x0000000000000001", "0x0000000000000020")
    binary, spawns = write_fake_smi(tmp_path, text)
    sampler = telemetry.Sampler(interval_s=0.05)
    source, notes = telemetry.pick_gpu_source(sampler.add_gpu_row, 0.05, nvidia_smi_path=binary, nvml=False)
    assert source.name == "nvidia-smi" and notes == []
    sampler.gpu_source = source
    start = time.monotonic()
    sampler.start()
    deadline = time.monotonic() + 10
    while len(sampler.gpu_samples) < 58 and time.monotonic() < deadline:
        time.sleep(0.05)
    sampler.stop()
    lines = spawns.read_text().splitlines()
    assert len(lines) == 1  # one process for the whole run, never one per sample
    assert "--query-gpu=" in lines[0] and "-lms 50" in lines[0] and "--format=csv" in lines[0]
    assert len(sampler.gpu_samples) == 58
    (gpu,) = sampler.summary(start, time.monotonic())["gpus"]
    assert gpu["throttle_reasons"] == ["sw_thermal_slowdown"] and gpu["busy_samples"] == 30
    pid = int(lines[0].split()[0])
    assert not os.path.exists("/proc/%d" % pid) or "zombie" in open("/proc/%d/status" % pid).read().lower()


def test_sampler_notes_an_nvidia_smi_that_cannot_sample(tmp_path):
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\necho 'Field \"clocks.max.sm\" is not a valid field to query.' >&2\nexit 2\n")
    script.chmod(0o755)
    sampler = telemetry.Sampler(interval_s=0.05)
    sampler.gpu_source, _notes = telemetry.pick_gpu_source(sampler.add_gpu_row, 0.05, nvidia_smi_path=str(script), nvml=False)
    sampler.start()
    time.sleep(0.2)
    sampler.stop()
    assert sampler.gpu_samples == []
    assert any(re.search(r"no samples: .*not a valid field", note) for note in sampler.describe()["notes"])


def test_no_gpu_source_without_nvml_and_nvidia_smi(tmp_path):
    source, notes = telemetry.pick_gpu_source(lambda *a: None, 1.0, nvidia_smi_path=str(tmp_path / "absent"), nvml=False)
    assert source is None and notes == ["no nvidia-smi: no GPU telemetry"]
    assert os.path.exists(fixture_path(*RECORDING))


def test_sampler_ignores_output_that_is_not_sampler_csv(tmp_path):
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\ncat %s\nexec sleep 600\n" % fixture_path("nvidia-smi", "a100-sxm4-v12.xml"))
    script.chmod(0o755)
    sampler = telemetry.Sampler(interval_s=0.05)
    sampler.gpu_source, _notes = telemetry.pick_gpu_source(sampler.add_gpu_row, 0.05, nvidia_smi_path=str(script), nvml=False)
    sampler.start()
    time.sleep(0.2)
    sampler.stop()
    assert sampler.gpu_samples == []
    assert sampler.describe()["notes"] == ["nvidia-smi sampler printed no CSV header: '<?xml version=\"1.0\" encoding=\"UTF-8\"?>'"]


def test_a_workload_shorter_than_the_interval_still_has_one_cpu_sample(tmp_path):
    # The loop's first sample is an interval away; sample_now() at the workload's end takes the utilisation since the
    # sampler started (here 300 of 400 jiffies busy), so the workload's window is never empty.
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 100 800 0 0 0 0 0 0\n")
    sampler = telemetry.Sampler(interval_s=60.0, proc_stat=str(stat))
    start = time.monotonic()
    sampler.start()
    stat.write_text("cpu  250 0 250 900 0 0 0 0 0 0\n")
    sampler.sample_now()
    end = time.monotonic()
    sampler.stop()
    assert [round(value, 1) for _stamp, value in sampler.cpu_samples] == [75.0]
    assert sampler.summary(start, end)["cpu"]["samples"] == 1


def test_host_memory_is_sampled_from_meminfo_when_asked(tmp_path):
    # The workload module's memory figures: MemTotal - MemAvailable of a recorded /proc/meminfo, in GiB.
    stamps = iter([1.0, 2.0, 5.0])
    sampler = telemetry.Sampler(interval_s=60, meminfo=fixture_path("hosts", "debian12-vm", "proc", "meminfo"),
                                clock=lambda: next(stamps))
    for _sample in range(3):
        sampler.sample_now()
    assert sampler.memory_summary(0.0, 3.0) == {"samples": 2, "used_max_gib": 0.41, "used_mean_gib": 0.41, "total_gib": 23.54}
    assert sampler.memory_summary(6.0, 9.0) == {"samples": 0, "used_max_gib": None, "used_mean_gib": None, "total_gib": None}
    for meminfo in (str(tmp_path / "absent"), None):  # unreadable: no sample, not a zero; not asked (profile): none
        sampler = telemetry.Sampler(interval_s=60, meminfo=meminfo)
        sampler.sample_now()
        assert sampler.memory_samples == []

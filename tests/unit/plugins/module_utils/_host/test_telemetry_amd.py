
"""Telemetry on AMD GPUs: amd-smi metric / rocm-smi output -> sample rows, and the live amd-smi sampler.

The amd-smi fake replays the recorded RX 6600 metric values (tests/unit/.../gpus/test_amd_smi.py, source in
tests/fixtures/amd/README.md); rocm-smi rows come from a recorded MI250 ``--showallinfo --json``.
"""

import json
import shutil
import time

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host import telemetry
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import amd_smi, rocm_smi
from ansible_collections.continuum.hydra.tests.support.amd import metric_text, rx6600_metric
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

LISTING = json.dumps([{"gpu": 0, "bdf": "0000:03:00.0", "uuid": "a5ff73bf-0000-1000-8000-000000000000"}])


def test_amd_smi_metric_becomes_one_sample_row_per_gpu():
    (row,) = telemetry.amd_rows(amd_smi.parse_amd_smi("[]", metric_text(wrapped=True)))
    assert (row["index"], row["util_pct"], row["power_w"], row["memory_used_mib"]) == (0, 1, 6, 202)
    # The judged temperature is the hotspot (junction) sensor; the gfx clock stands for the SM clock.
    assert (row["temperature_c"], row["sm_clock_mhz"], row["sm_clock_max_mhz"], row["mem_clock_mhz"]) == (37, 800, 2750, 541)
    assert (row["pcie_gen"], row["pcie_width"], row["throttled"], row["throttle_mask"]) == (4, 8, False, None)


def test_a_throttled_amd_gpu_shows_in_the_summary():
    doc = rx6600_metric()
    doc[0]["power"]["throttle_status"] = "THROTTLED"
    doc[0]["usage"]["gfx_activity"] = {"value": 99, "unit": "%"}
    rows = telemetry.amd_rows(amd_smi.parse_amd_smi("[]", metric_text(doc)))
    (gpu,) = telemetry.summarize([], [(1.0, rows[0]), (2.0, rows[0])], 0.0, 3.0)["gpus"]
    assert gpu["throttle_reasons"] == ["throttled"] and gpu["busy_samples"] == 2 and gpu["util_max_pct"] == 99


def test_rocm_smi_recordings_give_a_row_per_device():
    (row,) = telemetry.amd_rows(rocm_smi.parse_rocm_smi(read_fixture("amd", "rocm-smi", "wandb-mi250-oam-gcd-drv624-rocm6.json")))
    assert (row["index"], row["pci_bus_id"], row["util_pct"]) == (0, "0000:29:00.0", 0)
    assert row["temperature_c"] is not None and row["power_w"] is not None
    rows = telemetry.amd_rows(rocm_smi.parse_rocm_smi(read_fixture("amd", "rocm-smi", "telegraf-mi100_rocm602.json")))
    assert [row["index"] for row in rows] == [0, 1, 2, 3]


def fake_amd_smi(tmp_path, metric_body):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "metric.json").write_text(metric_text(wrapped=True))
    (tmp_path / "list.json").write_text(LISTING)
    script = bindir / "amd-smi"
    script.write_text('#!/bin/sh\necho "$*" >> "%s/calls"\ncase "$1 $2" in\n"list --json") exec cat "%s/list.json";;\n'
                      '"metric --json") %s;;\nesac\nexit 2\n' % (tmp_path, tmp_path, metric_body.replace("%s", str(tmp_path))))
    script.chmod(0o755)
    return str(bindir)


def test_without_nvidia_smi_the_sampler_runs_amd_smi_once_per_interval(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % fake_amd_smi(tmp_path, 'exec cat "%s/metric.json"'))
    if shutil.which("nvidia-smi"):
        pytest.skip("nvidia-smi is installed here")
    sampler = telemetry.Sampler(interval_s=0.1)
    sampler.gpu_source, notes = telemetry.pick_gpu_source(sampler.add_gpu_row, 0.1, nvml=False)
    assert notes == ["no nvidia-smi: GPU telemetry from amd-smi"]
    sampler.start()
    time.sleep(0.8)
    sampler.stop()
    described = sampler.describe()
    assert described["gpu_source"] == "amd-smi" and described["notes"] == []
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == "list --json" and set(calls[1:]) == {"metric --json"}
    # One call per interval, not a busy loop: 0.8 s at 0.1 s gives at most ~8 (each call takes some ms).
    assert 2 <= len(calls) - 1 <= 9 and len(sampler.gpu_samples) == len(calls) - 1
    (gpu,) = sampler.summary(0.0, time.monotonic() + 1)["gpus"]
    assert (gpu["pci_bus_id"], gpu["power_max_w"], gpu["sm_clock_max_mhz"]) == ("0000:03:00.0", 6, 2750)


def test_a_hanging_amd_smi_is_cut_at_its_deadline_and_noted(tmp_path):
    bindir = fake_amd_smi(tmp_path, "exec sleep 600")
    rows = []
    source = telemetry.AmdSource(bindir + "/amd-smi", "amd-smi", 0.05, lambda stamp, row: rows.append(row), call_timeout_s=0.3)
    started = time.monotonic()
    source.open()
    time.sleep(1.5)  # three calls, each cut at 0.3 s
    source.close()
    assert time.monotonic() - started < 5
    assert rows == [] and source.error.startswith("amd-smi sampler stopped after 3 failed calls")
    assert "timed out" in source.error
    # Stopped early (the benchmark ended first): the reason is kept all the same.
    early = telemetry.AmdSource(bindir + "/amd-smi", "amd-smi", 0.05, lambda stamp, row: rows.append(row), call_timeout_s=0.3)
    early.open()
    time.sleep(0.5)
    early.close()
    assert early.error.startswith("amd-smi sampler produced no samples: ") and "timed out" in early.error

"""The tenant probe on real files and real processes: both formats, stale PIDs, garbage, a FIFO, a reused PID, I/O."""

import json
import os
import subprocess
import time

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import tenant as probe
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "60"])
    time.sleep(0.05)
    yield proc.pid
    proc.kill()
    proc.wait()


def dead_pid():
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_metric_files_of_every_kind(tmp_path, sleeper):
    other = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / ("%d.metric" % sleeper)).write_text("p99_latency_ms: 87.5\n")
        (tmp_path / ("%d.metric" % other.pid)).write_text("120\n")
        gone = dead_pid()
        (tmp_path / ("%d.metric" % gone)).write_text("5\n")
        (tmp_path / "4194000.metric").write_text("garbage\n")
        (tmp_path / "notapid.metric").write_text("5\n")
        (tmp_path / "4194001.metric").mkdir()  # unreadable: a directory
        (tmp_path / "4194002.metric").write_bytes(b"\xff\xfe\x00")
        (tmp_path / "4194003.metric").write_text("1" * 5000)
        (tmp_path / "README").write_text("not a metric file: ignored\n")
        os.mkfifo(str(tmp_path / "4194004.metric"))  # a FIFO without a writer: the read blocks, the deadline ends it
        found, stale, garbage = probe.read_metrics(str(tmp_path), timeout=0.5)
    finally:
        other.kill()
        other.wait()
    assert sorted((t["pid"], t["p99_ms"], t["comm"]) for t in found) == sorted([(sleeper, 87.5, "sleep"), (other.pid, 120.0, "sleep")])
    assert all(t["key"] == "%d:%d" % (t["pid"], t["starttime"]) for t in found)
    assert [s["pid"] for s in stale] == [gone] and "has exited" in stale[0]["reason"]
    reasons = dict((os.path.basename(g["file"]), g["reason"]) for g in garbage)
    assert reasons["4194000.metric"].startswith("'garbage' is not a number")
    assert reasons["notapid.metric"] == "the name is not <PID>.metric"
    assert "unreadable" in reasons["4194001.metric"]
    assert "not text" in reasons["4194002.metric"] or "binary" in reasons["4194002.metric"]
    assert "larger than 4096 bytes" in reasons["4194003.metric"]
    assert "timed out" in reasons["4194004.metric"] or "0.5" in reasons["4194004.metric"]
    assert "README" not in reasons


def test_a_file_older_than_its_process_is_a_reused_pid(tmp_path, sleeper):
    path = tmp_path / ("%d.metric" % sleeper)
    path.write_text("99\n")
    os.utime(str(path), (time.time() - 3600, time.time() - 3600))
    found, stale, garbage = probe.read_metrics(str(tmp_path), timeout=2)
    assert found == [] and garbage == [] and "PID was reused" in stale[0]["reason"]


def test_probe_samples_a_real_writer_and_reads_the_previous_state(tmp_path, sleeper):
    metrics = tmp_path / "m"
    metrics.mkdir()
    (metrics / ("%d.metric" % sleeper)).write_text("300\n")
    state = tmp_path / "state"
    state.mkdir()
    (state / "tenants.json").write_text(json.dumps({"schema": 1, "runs": 3, "tenants": {}}))
    target = str(tmp_path / "dd.out")
    writer = subprocess.Popen(["dd", "if=/dev/zero", "of=" + target, "bs=4k", "count=50000", "oflag=direct,dsync"],
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.2)
        data = probe.probe_tenants({"tenant_metrics_dir": str(metrics), "state_dir": str(state), "tenant_io_sample_s": 0.5,
                                    "timeouts": {"command": 5, "nvidia_smi": 5}, "nvidia_smi_path": str(tmp_path / "none")})
    finally:
        writer.kill()
        writer.wait()
    assert [t["pid"] for t in data["tenants"]] == [sleeper]
    dd = [p for p in data["processes"] if p["pid"] == writer.pid]
    assert dd and dd[0]["comm"] == "dd" and dd[0]["write_bps"] > 0
    # Each rate is rounded to 0.1 on its own, so the sum of the rounded parts may be off by one digit.
    assert dd[0]["io_bps"] == pytest.approx(dd[0]["write_bps"] + dd[0]["read_bps"], abs=0.1)
    assert data["previous"]["runs"] == 3 and data["state_problem"] is None
    assert data["gpu_source"] is None and "does not exist" in data["gpu_reason"]
    assert data["devices"] and all(":" in d for d in data["devices"])


def test_no_metrics_dir_is_absent_and_a_bad_device_is_named(tmp_path):
    with pytest.raises(ProbeAbsent, match="does not exist"):
        probe.probe_tenants({"tenant_metrics_dir": str(tmp_path / "none")})
    assert probe.device_numbers(["8:0"]) == ["8:0"]
    with pytest.raises(ProbeError, match="tenant_io_devices: '/nope' is neither MAJ:MIN"):
        probe.device_numbers(["/nope"])


def test_whole_disks_leave_out_loop_and_zram(tmp_path):
    for name, dev, size in (("vda", "254:0", "100"), ("loop0", "7:0", "100"), ("zram0", "253:0", "100"), ("sdb", "8:16", "0")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "dev").write_text(dev + "\n")
        (tmp_path / name / "size").write_text(size + "\n")
    assert probe.whole_disks(str(tmp_path)) == ["254:0"]

"""Deadlines of a doctor run with real processes: one nvidia-smi -q per run, a hung nvidia-smi started once,
setsid'd grandchildren killed, a hung ~/.nccl.conf, and the whole-run deadline (timeouts.total).

No wall-time assertions: call counts, reasons and which processes survive.
"""

import os
import sys
import threading

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils import _results, _status
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue as probe_catalogue
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent
from ansible_collections.continuum.hydra.tests.support.doctor_probes import probe_table
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path

GPU_CHECKS = ["gpu", "driver", "cuda.driver_version"]


def _gone(pid):
    """No process (not even a zombie) with this pid is left in /proc."""
    return not os.path.exists("/proc/%d" % pid)


def _fake_smi(tmp_path, body):
    """An executable nvidia-smi that logs '<pid> <args>' per start, then runs body (sh)."""
    log = tmp_path / "smi.log"
    log.write_text("")
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\necho \"$$ $*\" >> '%s'\n%s\n" % (log, body))
    script.chmod(0o755)
    return str(script), log


def _starts(log, first_arg=None):
    lines = [line.split(" ", 1) for line in log.read_text().splitlines()]
    return [line for line in lines if first_arg is None or (len(line) > 1 and line[1].split()[0] == first_arg)]


def _checks(result):
    return {chk["id"]: chk for chk in result["checks"]}


def test_nvidia_smi_q_runs_exactly_once_per_doctor_run(tmp_path):
    xml = fixture_path("nvidia-smi", "a100-sxm4-v12.xml")
    nvlink = fixture_path("nvidia-smi-nvlink", "a100-sxm4-40gb-status.txt")
    smi, log = _fake_smi(tmp_path, 'case "$1" in -q) cat \'%s\';; nvlink) cat \'%s\';; esac' % (xml, nvlink))
    result = _doctor.run(only=GPU_CHECKS, nvidia_smi_path=smi, timeouts={"kernel_log": 5})
    assert len(_starts(log, "-q")) == 1
    nvlink_calls = [line[1] for line in _starts(log, "nvlink")]  # --status (gpu.nvlink), -e (gpu.nvlink_errors): once each
    assert len(nvlink_calls) == len(set(nvlink_calls)) <= 2
    assert result["probes"]["nvidia_smi"]["status"] == _status.READ_OK
    assert _checks(result)["driver.version"]["status"] != _status.ERROR


def test_a_hung_nvidia_smi_is_started_once_and_every_gpu_check_names_the_timeout(tmp_path):
    smi, log = _fake_smi(tmp_path, "exec sleep 600")
    result = _doctor.run(only=GPU_CHECKS, nvidia_smi_path=smi, timeouts={"nvidia_smi": 0.5, "kernel_log": 5})
    starts = _starts(log)
    assert len(starts) == 1 and starts[0][1].startswith("-q")  # nvlink did not call it again
    assert _gone(int(starts[0][0]))
    assert "timed out after 0.5s" in result["probes"]["nvidia_smi"]["reason"]
    checks = _checks(result)
    assert checks["driver.nvidia_smi"]["status"] == _status.ERROR
    assert "timed out after 0.5s" in checks["driver.nvidia_smi"]["message"]
    for chk in CATALOGUE:
        if chk.id in checks and "nvidia_smi" in chk.requires:  # blocked by the root that reports the hang
            assert checks[chk.id]["status"] == _status.SKIP, chk.id
            assert checks[chk.id]["blocked_by"] == "driver.nvidia_smi", chk.id
            assert "timed out after 0.5s" in checks[chk.id]["message"], chk.id
    assert result["probes"]["nvlink"]["status"] == _status.READ_FAILED
    assert "nvidia-smi failed earlier in this run" in result["probes"]["nvlink"]["reason"]


def test_a_setsid_grandchild_of_a_hung_nvidia_smi_is_killed(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    escape = ("import os; os.setsid(); open(%r, 'w').write(str(os.getpid())); os.execvp('sleep', ['sleep', '600'])"
              % str(pid_file))
    smi, log = _fake_smi(tmp_path, "'%s' -c \"%s\" &\nwhile [ ! -s '%s' ]; do sleep 0.01; done\nexec sleep 600"
                         % (sys.executable, escape, pid_file))
    result = _doctor.run(only=["driver.version"], nvidia_smi_path=smi, timeouts={"nvidia_smi": 2})
    check = _checks(result)["driver.version"]
    assert check["status"] == _status.ERROR and "timed out after 2s" in check["message"]
    grandchild = int(pid_file.read_text())
    assert _gone(grandchild), "the setsid'd grandchild survived the timeout"
    assert _gone(int(_starts(log)[0][0]))


def _release_fifo(path):
    """Let a reader stuck opening the FIFO go (it reads end of file), so no thread stays blocked."""
    try:
        fd = os.open(str(path), os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return
    os.close(fd)


def test_a_hung_nccl_conf_in_home_makes_env_config_error_and_the_run_returns(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    fifo = home / ".nccl.conf"
    os.mkfifo(str(fifo))  # a FIFO without a writer blocks open() like a file on a hung NFS home
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("NCCL_CONF_FILE", raising=False)
    try:
        result = _doctor.run(only=["nccl.env_config"], timeouts={"command": 0.3})
    finally:
        _release_fifo(fifo)
    check = _checks(result)["nccl.env_config"]
    assert check["status"] == _status.ERROR
    assert str(fifo) in check["message"] and "timed out after 0.3s" in check["message"]
    assert result["probes"]["host"]["status"] == _status.READ_OK  # the host facts are still there
    assert result["environment"]["hostname"]


def _assert_complete(result):
    assert set(result) >= {"schema_version", "environment", "checks", "summary", "overall_status", "total_duration_ms", "probes"}
    assert sum(result["summary"].values()) == len(result["checks"])
    assert result["summary"] == _results.summarize(result["checks"])
    for chk in result["checks"]:
        assert set(chk) >= {"id", "title", "category", "status", "message", "details", "remediation", "duration_ms"}


def test_past_the_total_deadline_no_probe_starts_and_unrun_checks_are_error(monkeypatch):
    started = []

    def slow_host(options):
        started.append("host")
        threading.Event().wait(0.3)  # outlives timeouts.total, finishes within the grace
        return {"hostname": "test-host"}

    def tracking(name):
        def probe(options):
            started.append(name)
            raise ProbeAbsent("absent")
        return probe

    table = probe_table(**dict((name, tracking(name)) for name in probe_catalogue.PROBES))
    table["host"] = slow_host
    result = _doctor.run(probes=table, timeouts={"total": 0.1}, level="deep")  # deep: every check of the catalogue
    assert started == ["host"]
    _assert_complete(result)
    assert len(result["checks"]) == len(CATALOGUE)
    assert result["environment"]["hostname"] == "test-host"
    reads = {chk.id: set(chk.probes) for chk in CATALOGUE}
    for chk in result["checks"]:
        if reads[chk["id"]] == {"host"}:
            continue  # its one probe ran before the deadline: judged as usual
        assert chk["status"] == _status.ERROR, chk["id"]
        assert chk["message"] == "not run: doctor deadline (timeouts.total=0.1s)", chk["id"]
    assert result["probes"]["nvidia_smi"] == dict(result["probes"]["nvidia_smi"], status=_status.READ_FAILED,
                                                  reason="not run: doctor deadline (timeouts.total=0.1s)")


def test_a_probe_stuck_past_the_deadline_is_abandoned_and_the_run_returns(monkeypatch):
    monkeypatch.setattr(probe_catalogue, "DEADLINE_GRACE_S", 0.2)
    release = threading.Event()

    def stuck(options):
        release.wait(60)
        return {"hostname": "late"}

    try:
        result = _doctor.run(probes=probe_table(host=stuck), timeouts={"total": 0.1})
    finally:
        release.set()
    _assert_complete(result)
    assert result["probes"]["host"]["reason"].startswith("not run: doctor deadline (timeouts.total=0.1s)")
    assert "probe host was still running" in result["probes"]["host"]["reason"]
    assert all(chk["status"] == _status.ERROR for chk in result["checks"])
    assert result["environment"].get("hostname") is None


def test_a_sysfs_probe_stuck_on_a_dead_device_fails_at_the_command_timeout_and_the_next_probe_runs():
    release = threading.Event()

    def stuck(options):
        release.wait(60)  # a read of a dead GPU's sysfs file that never returns
        return {}

    try:
        out = probe_catalogue.collect(["nvidia_pci", "host"], {"timeouts": {"command": 0.2}},
                                      {"nvidia_pci": stuck, "host": lambda o: {"hostname": "h"}})
    finally:
        release.set()
    assert out["nvidia_pci"]["status"] == _status.READ_FAILED
    assert out["nvidia_pci"]["reason"] == "probe nvidia_pci (reading /proc and /sys) timed out after 0.2s"
    assert out["host"] == dict(out["host"], status=_status.READ_OK, data={"hostname": "h"})


def test_probe_timeouts_are_capped_by_the_time_left():
    seen = {}

    def probe(options):
        seen.update(dict(options["timeouts"]))
        seen["envelopes"] = sorted(options["envelopes"])
        return {}

    deadline = probe_catalogue.Deadline(probe_catalogue.time.monotonic() + 5, 5)
    probe_catalogue.collect(["host", "p"], {"timeouts": {"command": 10, "torch": 90}}, {"host": lambda o: {}, "p": probe}, deadline)
    assert 0 < seen["command"] <= 5 and 0 < seen["torch"] <= 5
    assert seen["envelopes"] == ["host"]


@pytest.mark.parametrize("value", [0, -1, "10", True])
def test_total_must_be_a_positive_number(value):
    with pytest.raises(_doctor.DoctorInputError, match="timeouts.total: .* is not a positive number of seconds"):
        _doctor.run(probes=probe_table(), timeouts={"total": value})

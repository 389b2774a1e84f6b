"""rvs output: the RVS user guide's recorded MI355X runs read into verdict lines and the summary box, failures planted
by editing copies, and the probe running a fake rvs (exit 0 on a failed test, as RVS does)."""

import os
import stat

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import rvs
from ansible_collections.continuum.hydra.plugins.module_utils._host import gpus
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

MODULES = ("babel", "gm", "gst", "iet", "mem", "pbqt", "pebb", "peqt", "smqt")


def log(module):
    return read_fixture("rvs", "rvs-user-guide", module + ".log")


def verdicts(data):
    return [(r["module"], r["gpu_id"], r["pass"]) for r in data["results"]]


@pytest.mark.parametrize("module", [m for m in MODULES if m != "smqt"])
def test_every_2026_recording_has_the_summary_box_gpu_map_and_versions(module):
    data = rvs.parse_rvs(log(module))
    assert data["version"] == "1.6.75" and data["rocm_version"] == "7.2.1-81"
    assert len(data["gpus"]) == 8
    assert data["gpus"][0] == {"gpu_id": "1590", "name": "AMD Instinct MI355X", "index": 4, "node": 6, "bdf": "0000:85:00.0"}
    assert [(row["module"], row["pass"]) for row in data["summary"]] == [(module, True)]
    assert data["errors"] == []


def test_gst_iet_peqt_mem_gm_verdict_lines():
    gst = rvs.parse_rvs(log("gst"))
    assert verdicts(gst) == [("gst", gpu, True) for gpu in ("42583", "27226", "11806", "57875")]
    assert gst["results"][0]["value"] == 1063560.0 and gst["results"][0]["target"] == 0.0
    assert gst["results"][0]["action"] == "gst-Tflops-2K2K2K-trig-fp4"
    iet = rvs.parse_rvs(log("iet"))
    assert sorted(r["gpu_id"] for r in iet["results"]) == sorted(g["gpu_id"] for g in iet["gpus"])
    assert all(r["module"] == "iet" and r["pass"] for r in iet["results"])
    assert verdicts(rvs.parse_rvs(log("peqt"))) == [("peqt", None, True)]
    mem = rvs.parse_rvs(log("mem"))
    assert [(r["module"], r["test"], r["pass"]) for r in mem["results"]][:2] == [("mem", 1, True), ("mem", 1, True)]
    gm = rvs.parse_rvs(log("gm"))
    assert [(r["metric"], r["violations"]) for r in gm["results"]] == [("temp", 0), ("clock", 0), ("mem_clock", 0), ("fan", 0), ("power", 0)]


def test_measurement_only_modules_have_no_verdict_line_but_their_summary_row():
    for module in ("babel", "pebb"):
        data = rvs.parse_rvs(log(module))
        assert data["results"] == [] and data["summary"][0]["pass"] is True


def test_pbqt_peer_lines_are_results_naming_both_gpus():
    data = rvs.parse_rvs(log("pbqt"))
    assert [(r["gpu_id"], r["peer_gpu_id"], r["pass"]) for r in data["results"]][:2] == [
        ("42583", "27226", True), ("42583", "36479", True)]
    assert len(data["results"]) == 7 and data["results"][0]["peer_bdf"] == "0000:15:00.0"
    # The 2018 form (issue 254): "p2p <gpu_id> <gpu_id> true|false"; a GPU paired with itself is no result.
    old = rvs.parse_rvs(read_fixture("rvs", "rvs-issue-254", "pqt-p2p.log"))
    assert len(old["results"]) == 18 and all(r["pass"] for r in old["results"])
    assert ("58162", "51205") in [(r["gpu_id"], r["peer_gpu_id"]) for r in old["results"]]


def test_recorded_smqt_bar_mismatch_is_three_failing_gpus():
    data = rvs.parse_rvs(log("smqt"))
    assert verdicts(data) == [("smqt", "3254", False), ("smqt", "50599", False), ("smqt", "33367", False)]
    assert data["summary"] == [] and data["version"] is None


def test_planted_failures_and_coloured_summary_rows_are_read():
    text = log("gst").replace("[GPU:: 27226] GFLOPS 1068301 Target GFLOPS: 0 met: TRUE",
                              "[GPU:: 27226] GFLOPS 1068301 Target GFLOPS: 1200000 met: FALSE")
    # rvs colours the result cell (\\033[31m FAIL \\033[0m) and, with -q, starts the row with a carriage return.
    text = text.replace("| gst-Tflops-2K2K2K-trig-fp4       | GST            | PASS            |",
                        "\r| gst-Tflops-2K2K2K-trig-fp4       | GST            | \x1b[31mFAIL          \x1b[0m  |")
    data = rvs.parse_rvs(text)
    assert ("gst", "27226", False) in verdicts(data)
    assert data["summary"] == [{"action": "gst-Tflops-2K2K2K-trig-fp4", "module": "gst", "pass": False}]


def test_a_line_that_cannot_be_read_is_counted_and_the_rest_judged():
    # Issue 23: "GFLOPS 1.2.3" (float) or a 5,000-digit violation count crashed the whole probe.
    text = log("gst").replace("GFLOPS 1068301 Target", "GFLOPS 1.2.3 Target", 1)
    data = rvs.parse_rvs(text + "\n" + log("gm").replace("violations 0", "violations " + "9" * 5000, 1))
    assert data["bad_lines"]["count"] == 2 and len(data["results"]) == (4 - 1) + (5 - 1)
    assert data["bad_lines"]["sample"][0]["error"].startswith("could not convert string to float")


def _fake_rvs(tmp_path, body):
    path = tmp_path / "rvs"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(tmp_path) + os.pathsep + "/usr/bin:/bin"


def test_probe_runs_rvs_level_or_conf_and_reads_a_failure_despite_exit_0(tmp_path, monkeypatch):
    recording = tmp_path / "out.log"
    recording.write_text(log("smqt"))
    monkeypatch.setenv("PATH", _fake_rvs(tmp_path, "echo \"$@\" > '%s/args'\ncat '%s'\nexit 0\n" % (tmp_path, recording)))
    data = rvs.probe_rvs(doctor.probe_options({}, level="deep"))
    assert (tmp_path / "args").read_text().split() == ["-r", "2"]
    assert data["exit_code"] == 0 and not any(r["pass"] for r in data["results"])
    rvs.probe_rvs(doctor.probe_options({"rvs_conf": "/opt/rocm/share/rocm-validation-suite/conf/gst_single.conf"}, level="deep"))
    assert (tmp_path / "args").read_text().split() == ["-c", "/opt/rocm/share/rocm-validation-suite/conf/gst_single.conf"]


def test_verdicts_printed_before_a_non_zero_exit_are_read(tmp_path, monkeypatch):
    # Issue 23: rvs exiting 1 after printing its verdicts was a probe error ("no result"): read them first.
    recording = tmp_path / "out.log"
    recording.write_text(log("smqt"))
    monkeypatch.setenv("PATH", _fake_rvs(tmp_path, "cat '%s'\necho 'RVS-ERROR [SMQT] [action_1] internal error' >&2\n"
                                                   "exit 1\n" % recording))
    data = rvs.probe_rvs(doctor.probe_options({}, level="deep"))
    assert data["exit_code"] == 1 and [r["pass"] for r in data["results"]] == [False] * 3
    assert data["errors"] == ["RVS-ERROR [SMQT] [action_1] internal error"]


def test_probe_absent_unsupported_platform_and_launch_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(rvs, "RVS_PATHS", ())
    monkeypatch.setattr(gpus, "ROCM_DIRS", ())
    monkeypatch.delenv("ROCM_PATH", raising=False)
    with pytest.raises(ProbeAbsent, match="rvs not found"):
        rvs.probe_rvs(doctor.probe_options({}))
    # rvs's own message (rvs/src/rvsexec.cpp) when -r has no configuration for the GPU.
    monkeypatch.setenv("PATH", _fake_rvs(tmp_path, "echo 'RVS-ERROR [RVS] No platform support for the detected GPU or no GPU detected !'\nexit 255\n"))
    with pytest.raises(ProbeAbsent, match=r"rvs -r 2: No platform support .* set hydra_expect.rvs_conf"):
        rvs.probe_rvs(doctor.probe_options({}))
    monkeypatch.setenv("PATH", _fake_rvs(tmp_path, "echo 'RVS-ERROR [RVS] Invalid configuration file !' >&2\nexit 255\n"))
    with pytest.raises(ProbeError, match=r"exited with rc 255 .*: RVS-ERROR \[RVS\] Invalid configuration file !"):
        rvs.probe_rvs(doctor.probe_options({"rvs_conf": "/nope.conf"}))

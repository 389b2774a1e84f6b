"""Kernel-log events judged inside their window, and the site's XID policy (issue 27 items 4 and 6).

Logs are the recorded `dmesg --time-format iso` of tests/fixtures/kernel-log with real NVRM / amdgpu lines of the
other recordings planted into them at chosen times (the stamp in the recording's own format); the probe's scan() reads
them and the registry judges, as in a doctor run.
"""

import datetime

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor_run
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import amdgpu_log, xid
from ansible_collections.continuum.hydra.tests.support.envelopes import absent, ok
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

NOW = datetime.datetime(2026, 11, 26, 12, 0, 0, tzinfo=datetime.timezone.utc)
DMESG = read_fixture("kernel-log", "dmesg-iso-kvm-guest.txt")
NVRM = read_fixture("kernel-log", "nvrm-xid-lines.txt").splitlines()
XID_79 = NVRM[1].split("kernel: ", 1)[1]  # NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.
XID_13 = NVRM[-1].split("] ", 1)[1]       # NVRM: Xid (0000:01:00): 13, 0005 00000000 ... (an application's fault)
XID_63 = NVRM[2]                          # NVRM: Xid (PCI:0000:10:1c): 63, ... Row Remapper: New row marked


def stamped(hours_ago, line):
    """A line as dmesg --time-format iso prints it, `hours_ago` before NOW."""
    when = NOW - datetime.timedelta(hours=hours_ago)
    return "%s,000000+00:00 %s" % (when.strftime("%Y-%m-%dT%H:%M:%S"), line)


def dmesg_with(*lines):
    return DMESG + "\n".join(lines) + "\n"


def judge(text, expect=None, window_applied=True, source="dmesg", hours=24):
    """gpu.xid_errors on a dmesg text cut at the window, as the kernel_log probe reads it (its own scan())."""
    policy = (expect or {}).get("xid_policy") or {}
    windows = sorted(set(float(rule["window_hours"]) for rule in policy.values() if rule.get("window_hours")))
    cutoff = NOW - datetime.timedelta(hours=hours) if window_applied and source == "dmesg" else None
    data = dict(xid.scan(text, cutoff, windows, NOW), source=source, journal_problem=None, window_hours=hours,
                window_applied=window_applied)
    (chk,) = [c for c in CATALOGUE if c.id == "gpu.xid_errors"]
    return registry.evaluate(chk, {"kernel_log": ok(data), "nvidia_smi": absent("no nvidia-smi in this test")}, expect or {})


def test_a_dated_fail_says_when_it_happened():
    record = judge(dmesg_with(stamped(3, XID_79)))
    assert record["status"] == "FAIL"
    assert record["message"] == ("XID 79 (GPU has fallen off the bus) x1 on GPU at 0000:2b:00, last at 2026-11-26T09:00:00+00:00 "
                                 "(last 24 h)")


def test_an_event_older_than_the_window_does_not_latch():
    record = judge(dmesg_with(stamped(30, XID_79)))
    assert record["message"].startswith("no XID in the kernel log (last 24 h)")  # SKIP: no NVIDIA driver in this test


def test_an_event_of_unknown_time_is_a_warn_never_a_fail():
    # busybox dmesg: no timestamps, the whole boot; the window cannot be applied (issue 27: old events latched).
    record = judge(dmesg_with(XID_79), window_applied=False)
    assert record["status"] == "WARN"
    assert "at an unknown time (its log line carries no time, so it may be older than the window" in record["message"]
    assert record["details"]["gpus"][0]["held"].startswith("its log line carries no time")
    # A line of a timestamped dmesg that lost its stamp is no different.
    assert judge(dmesg_with(stamped(1, "NVRM: GPU at PCI:0000:2b:00: GPU-0b11d014"), XID_79))["status"] == "WARN"
    # journalctl applies the window itself: an event there is inside it even when its stamp cannot be read.
    record = judge(XID_79, source="journalctl")
    assert record["status"] == "FAIL" and "within the last 24 h (its time not read)" in record["message"]


def test_an_amdgpu_event_of_unknown_time_is_a_warn_never_a_fail():
    # A real MI50 uncorrectable error and failed reset (dmesg -T ctime stamps, which the ISO reader does not place).
    text = read_fixture("amd", "kernel-log", "rocm-1886-dmesg-ctime-mi50-athub-ue-reset-smu-fail.log")
    (chk,) = [c for c in CATALOGUE if c.id == "gpu.amdgpu_errors"]

    def judged(source, window_applied):
        data = dict(amdgpu_log.scan(text), source=source, journal_problem=None, window_hours=24, window_applied=window_applied)
        return registry.evaluate(chk, {"amdgpu_log": ok(data), "amd_smi": absent("no amd-smi in this test")}, {})
    # From journalctl, which applied the window: FAIL. From a dmesg that could not be cut at it: WARN, saying why.
    assert judged("journalctl", True)["status"] == "FAIL"
    undated = judged("dmesg", False)
    assert undated["status"] == "WARN"
    assert "at an unknown time (its log line carries no time" in undated["message"]


def test_site_policy_promotes_a_code_after_n_in_m_hours():
    policy = {"xid_policy": {"13": {"severity": "critical", "count": 5, "window_hours": 6}}}
    five = dmesg_with(*[stamped(hours, XID_13) for hours in (5, 4, 3, 2, 1)])
    record = judge(five, policy)
    assert record["status"] == "FAIL"
    entry = record["details"]["gpus"][0]
    assert entry["policy"] == {"severity": "critical", "count": 5, "window_hours": 6, "seen": 5, "applied": True,
                               "catalogue_severity": "info"}
    assert record["message"] == ("XID 13 (graphics engine exception (usually an application fault); site policy: critical "
                                 "after 5 in 6 h) x5 on GPU at 0000:01:00, last at 2026-11-26T11:00:00+00:00 (last 24 h)")
    # Four within 6 h (the fifth 10 h ago, still in the 24 h window): the catalogue's grade stands.
    four = dmesg_with(*[stamped(hours, XID_13) for hours in (10, 4, 3, 2, 1)])
    record = judge(four, policy)
    assert record["status"] == "PASS" and record["details"]["gpus"][0]["policy"]["seen"] == 4
    # Without the policy, five Xid 13 are an application's fault.
    assert judge(five)["status"] == "PASS"


def test_site_policy_demotes_a_code():
    line = stamped(2, XID_63)
    assert judge(dmesg_with(line))["status"] == "WARN"
    record = judge(dmesg_with(line), {"xid_policy": {63: {"severity": "info"}}})
    assert record["status"] == "PASS" and record["details"]["gpus"][0]["policy"]["applied"] is True


@pytest.mark.parametrize("policy, message", [
    ({"x13": {"severity": "critical"}}, "expect.xid_policy: 'x13' is not an XID code (a positive whole number)"),
    ({"13": {"severity": "fatal"}}, "expect.xid_policy.13.severity: 'fatal' is not one of critical, warning, info"),
    ({"13": {"severity": "info", "cnt": 2}}, "expect.xid_policy.13: unknown field 'cnt'; accepted: severity, count, window_hours"),
    ({"13": {"severity": "critical", "count": 0}}, "expect.xid_policy.13.count: 0 is not a whole number >= 1"),
    ({"13": {"severity": "critical", "window_hours": -1}}, "expect.xid_policy.13.window_hours: -1 is not a positive number of hours"),
    ({"13": "critical"}, "expect.xid_policy.13: 'critical' is not a mapping of severity, count, window_hours"),
    ([13], "expect.xid_policy: [13] is not a dict"),
])
def test_a_bad_policy_is_one_line_naming_the_value(policy, message):
    assert _expect.problems({"xid_policy": policy}) == [message]
    with pytest.raises(doctor_run.DoctorInputError) as caught:
        doctor_run.validate(None, None, None, {"xid_policy": policy})
    assert str(caught.value) == message


def test_a_policy_window_longer_than_the_log_doctor_reads_is_refused():
    with pytest.raises(doctor_run.DoctorInputError, match=r"^expect.xid_policy.13.window_hours: 48 is longer than "
                                                          r"xid_window_hours 24, the kernel log doctor reads; raise xid_window_hours$"):
        doctor_run.validate(None, None, None, {"xid_policy": {"13": {"severity": "critical", "window_hours": 48}}})
    doctor_run.validate(None, None, None, {"xid_policy": {"13": {"severity": "critical", "window_hours": 48}},
                                           "xid_window_hours": 48})


def test_doctor_hands_the_policy_windows_to_the_kernel_log_probe(tmp_path, monkeypatch):
    # The probe as doctor runs it: options resolved from hydra_expect, a journalctl on PATH replaying the planted log.
    from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import gpu as gpu_probes
    log = tmp_path / "kernel.log"
    now = datetime.datetime.now(datetime.timezone.utc)
    log.write_text("\n".join("%s+0000 host kernel: %s" % ((now - datetime.timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M:%S"), XID_13)
                             for h in (10, 3, 1)) + "\n")
    journalctl = tmp_path / "journalctl"
    journalctl.write_text("#!/bin/sh\ncat '%s'\n" % log)
    journalctl.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % tmp_path)
    expect = {"xid_policy": {"13": {"severity": "critical", "count": 2, "window_hours": 6}}}
    options = doctor_run.probe_options(expect)
    assert options["xid_policy_windows"] == [6.0]
    data = gpu_probes.probe_kernel_log(options)
    assert [(group["code"], group["count"], group["within"]) for group in data["xid_counts"]] == [(13, 3, {"6": 2})]


def test_a_dcgm_or_rvs_failure_says_it_comes_from_this_runs_diagnostic(tmp_path, monkeypatch):
    # The probes as doctor runs them (a dcgmi / rvs on PATH replaying a recorded failing run): the FAIL names its time.
    from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import dcgm as dcgm_probe
    from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import rvs as rvs_probe
    from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path
    for name, recording, rc in (("dcgmi", fixture_path("dcgm-diag", "virtualclient", "t4-dcgm31-r2-healthy.json"), 0),
                                ("rvs", fixture_path("rvs", "rvs-user-guide", "smqt.log"), 0)):
        tool = tmp_path / name
        tool.write_text("#!/bin/sh\ncat '%s'\nexit %d\n" % (recording, rc))
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % tmp_path)
    options = doctor_run.probe_options({}, level="deep")
    rvs_data = rvs_probe.probe_rvs(options)
    (chk,) = [c for c in CATALOGUE if c.id == "gpu.rvs"]
    record = registry.evaluate(chk, {"rvs": ok(rvs_data)}, {})
    assert record["status"] == "FAIL" and record["message"].endswith("(diagnostic run at %s)" % rvs_data["ran_at"])
    assert datetime.datetime.fromisoformat(dcgm_probe.probe_dcgm_diag(options)["ran_at"]).tzinfo is not None

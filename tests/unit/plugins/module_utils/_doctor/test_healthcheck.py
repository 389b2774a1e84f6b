"""The node-local health check's pure part: config, exit codes, the drain decision, the reason, last.json.

Results come from doctor's run() over a real nvidia-smi recording (a copy with uncorrectable ECC errors planted
for the failing node), node states from real `scontrol show node -o` recordings of slurm-wlm 22.05.8.
"""

import json
import os
import pwd
import shutil
import subprocess
import tempfile

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import healthcheck as hc
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue as probe_catalogue
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import healthcheck as last_probe
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvidia_smi
from ansible_collections.continuum.hydra.plugins.module_utils._host.slurm import MAX_REASON_CHARS, drain_args, parse_show_node
from ansible_collections.continuum.hydra.tests.support.fake_scontrol import read_state, write_fake_scontrol
from ansible_collections.continuum.hydra.tests.support.fleet import UNCORRECTABLE_ECC, fixture, plant, write_host_bin
from ansible_collections.continuum.hydra.tests.support.helpers import REPO, read_fixture

ONLY = ["gpu.ecc_errors", "driver.nvidia_smi"]
CONFIG = hc.normalize_config({"only": ONLY})
RECORDED = read_fixture("slurm", "scontrol-show-node-22.05-admin-and-hydra-drain.txt").splitlines()


def _table(smi):
    def absent(options):
        raise ProbeAbsent("not on this test host")
    table = dict((name, absent) for name in probe_catalogue.PROBES)
    table["host"] = lambda options: {"hostname": "test-host"}
    table["nvidia_smi"] = smi
    return table


def result_of(xml=None, error=None, **options):
    def smi(opts):
        if error:
            raise ProbeError(error)
        return parse_nvidia_smi(xml)
    kwargs = hc.doctor_options(hc.normalize_config(dict({"only": ONLY}, **options)))
    return doctor.run(probes=_table(smi), **kwargs)


HEALTHY = result_of(fixture("a100-sxm4-v12.xml"))
ECC = result_of(plant(fixture("a100-sxm4-v12.xml"), UNCORRECTABLE_ECC))
HUNG = result_of(error="nvidia-smi -q -x timed out after 3s")


def node(line_index):
    nodes = parse_show_node(RECORDED[line_index])
    assert len(nodes) == 1, nodes
    return next(iter(nodes.values()))


def test_exit_codes_follow_the_worst_check():
    assert [c["status"] for c in ECC["checks"] if c["id"] == "gpu.ecc_errors"] == ["FAIL"]
    assert (hc.exit_code(HEALTHY), hc.exit_code(ECC), hc.exit_code(HUNG)) == (0, 1, 2)
    assert hc.exit_code({"checks": []}) == 2  # judged nothing: never healthy


def test_parse_node_reads_state_and_reason_from_the_recording():
    assert node(0) == {"state": "IDLE", "flags": [], "drained": False, "reason": None}
    assert node(1) == {"state": "IDLE+DRAIN", "flags": ["DRAIN"], "drained": True, "reason": "admin: bad fan"}
    assert node(2) == {"state": "IDLE+DRAIN", "flags": ["DRAIN"], "drained": True, "reason": "hydra: gpu.ecc_errors,x=y"}
    assert parse_show_node("Node node9 not found\n") == {}


def test_ecc_fault_drains_an_idle_node_with_a_hydra_reason():
    decision = hc.decide(ECC, CONFIG, hc.HEALTHCHECK, "node1", node(0))
    assert decision["exit_code"] == 1 and decision["action"] == hc.DRAINED
    assert decision["reason"].startswith("hydra: gpu.ecc_errors: ")
    assert "uncorrectable" in decision["reason"].lower() and len(decision["reason"]) <= MAX_REASON_CHARS
    assert drain_args("node1", decision["reason"]) == ["update", "nodename=node1", "state=drain", "reason=" + decision["reason"]]


def test_healthy_node_is_left_alone_and_hydra_drain_is_never_resumed():
    assert hc.decide(HEALTHY, CONFIG, hc.HEALTHCHECK, "node1", None)["action"] == hc.NONE
    decision = hc.decide(HEALTHY, CONFIG, hc.HEALTHCHECK, "node3", node(2))
    assert decision["action"] == hc.NONE and "slurm_gate" in decision["why"]


def test_admin_drain_is_never_touched_and_own_drain_is_not_redone():
    admin = hc.decide(ECC, CONFIG, hc.HEALTHCHECK, "node2", node(1))
    assert admin["action"] == hc.LEFT_ADMIN_DRAIN and "admin: bad fan" in admin["why"]
    assert hc.decide(ECC, CONFIG, hc.HEALTHCHECK, "node3", node(2))["action"] == hc.LEFT_HYDRA_DRAIN


def test_unreadable_node_or_no_node_name_is_not_drained():
    assert hc.decide(ECC, CONFIG, hc.HEALTHCHECK, "node1", None, "scontrol timed out")["action"] == hc.NOT_DRAINED
    decision = hc.decide(ECC, CONFIG, hc.HEALTHCHECK, None, None)
    assert decision["action"] == hc.NOT_DRAINED and "SLURMD_NODENAME" in decision["why"] and decision["exit_code"] == 1


def test_error_drains_only_when_configured():
    assert hc.decide(HUNG, CONFIG, hc.HEALTHCHECK, "node1", node(0)) == {
        "exit_code": 2, "action": hc.NONE, "reason": None, "why": "could not judge; drain_on_error is off"}
    config = hc.normalize_config({"only": ONLY, "drain_on_error": True})
    decision = hc.decide(HUNG, config, hc.HEALTHCHECK, "node1", node(0))
    assert decision["action"] == hc.DRAINED and decision["reason"].startswith("hydra: driver.nvidia_smi: could not judge: ")


def test_prolog_and_epilog_only_set_the_exit_code():
    prolog = hc.decide(ECC, CONFIG, hc.PROLOG, "node1", None)
    assert (prolog["exit_code"], prolog["action"]) == (1, hc.EXIT_ONLY)
    # A prolog that cannot judge lets the job run (a nonzero prolog drains the node and holds the job).
    assert hc.decide(HUNG, CONFIG, hc.EPILOG, "node1", None)["exit_code"] == 0
    config = hc.normalize_config({"drain_on_error": True})
    assert hc.decide(HUNG, config, hc.PROLOG, "node1", None)["exit_code"] == 2


def test_reason_is_sanitised_and_bounded():
    checks = [{"id": "gpu.x", "status": "FAIL", "message": 'GPU 0 "bad" [edge]\n\tline\u00e9 ' + "y" * 300},
              {"id": "gpu.y", "status": "FAIL", "message": "second"}]
    reason = hc.reason_text({"checks": checks})
    assert reason.startswith("hydra: gpu.x: GPU 0 bad (edge) line ") and reason.endswith("... (+1 more)")
    assert len(reason) == MAX_REASON_CHARS and '"' not in reason and "\n" not in reason and reason.isascii()


def test_the_reason_names_a_gpu_without_its_uuid_so_the_problem_fits():
    message = ("GPU 0 00000000:01:00.0 GPU-513536b6-2b29-5e4c-8c2b-1e69664bb298: GPU lost or needing a reset: "
               "temperature.gpu_c unreadable (GPU requires reset)")
    reason = hc.reason_text({"checks": [{"id": "gpu.temperature", "status": "FAIL", "message": message}]})
    assert reason.startswith("hydra: gpu.temperature: GPU 0 00000000:01:00.0: GPU lost or needing a reset: "
                             "temperature.gpu_c unreadable") and len(reason) <= MAX_REASON_CHARS


def test_the_program_never_runs_its_own_check():
    options = hc.doctor_options(CONFIG)
    assert hc.OWN_CHECK in options["exclude"] and options["timeouts"]["total"] == hc.DEFAULT_TOTAL_TIMEOUT
    assert options["level"] == "quick" and options["only"] == ONLY


@pytest.mark.parametrize("text, message", [
    ("{", "not JSON"),
    ("[]", "a JSON object is expected"),
    ('{"levle": "quick"}', "unknown key 'levle'; accepted: "),
    ('{"level": "fast"}', "level: 'fast' is not a level; accepted: quick, standard, deep"),
    ('{"drain_on_error": "yes"}', "drain_on_error: 'yes' is not a bool"),
    ('{"scontrol_timeout": true}', "scontrol_timeout: True is not a int or float"),
    ('{"scontrol_timeout": 0}', "scontrol_timeout: 0 is not a positive number"),
    ('{"state_dir": "var/lib"}', "state_dir: 'var/lib' is not an absolute path"),
    ('{"state_file": "/x/last.json"}', "unknown key 'state_file'; accepted: "),
])
def test_bad_config_is_one_line_naming_the_value(text, message):
    with pytest.raises(hc.ConfigError, match=None) as info:
        hc.parse_config(text, "/etc/x.json")
    assert message in str(info.value) and str(info.value).startswith("/etc/x.json: ") and "\n" not in str(info.value)


def test_record_is_the_doctor_result_plus_the_decision():
    decision = hc.decide(ECC, CONFIG, hc.HEALTHCHECK, "node1", node(0))
    last = hc.record(ECC, decision, hc.HEALTHCHECK, "node1", True, "2026-11-24T12:00:00+00:00")
    assert last["checks"] == ECC["checks"] and last["overall_status"] == "failed"
    assert (last["exit_code"], last["drained"], last["reason"], last["at"], last["node"]) == (
        1, True, decision["reason"], "2026-11-24T12:00:00+00:00", "node1")
    json.dumps(last, allow_nan=False)


def test_main_bad_config_exits_2_with_one_line(tmp_path, capsys):
    path = tmp_path / "cfg.json"
    path.write_text('{"level": "fast"}')
    assert hc.main(["--config", str(path)], {}) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "level: 'fast' is not a level" in err
    assert hc.main(["--config", str(tmp_path / "missing.json")], {}) == 2
    assert hc.main(["--mode", "sometimes"], {}) == 2


def test_a_run_whose_every_check_skipped_or_has_an_unknown_status_is_unjudged_not_healthy():
    assert hc.exit_code({"checks": [{"id": "gpu.ecc_errors", "status": "SKIP"}]}) == 2
    assert hc.exit_code({"checks": [{"id": "a", "status": "PASS"}, {"id": "b", "status": None}]}) == 2
    assert hc.exit_code({"checks": [{"id": "a", "status": "PASS"}, {"id": "b", "status": "SKIP"}]}) == 0
    skipped = {"checks": [{"id": "gpu.ecc_errors", "status": "SKIP", "message": "nvidia-smi not found"}]}
    assert hc.decide(skipped, CONFIG, hc.HEALTHCHECK, "node1", node(0))["action"] == hc.NONE
    drain = hc.decide(skipped, hc.normalize_config({"drain_on_error": True}), hc.HEALTHCHECK, "node1", node(0))
    assert drain["action"] == hc.DRAINED and drain["reason"] == "hydra: could not judge: no check judged the node"


@pytest.mark.parametrize("text", ['{"scontrol_timeout": NaN}', '{"scontrol_timeout": Infinity}'])
def test_a_scontrol_timeout_that_is_not_finite_is_refused(text):
    with pytest.raises(hc.ConfigError, match="scontrol_timeout: .* is not a positive number"):
        hc.parse_config(text, "/etc/x.json")


def test_a_node_down_or_failed_by_someone_else_or_of_unknown_state_is_never_drained():
    down = parse_show_node("NodeName=node4 Arch=x86_64 State=DOWN+NOT_RESPONDING Reason=maint by admin [root@2026-11-24T10:00:00]")
    decision = hc.decide(ECC, CONFIG, hc.HEALTHCHECK, "node4", down["node4"])
    assert decision["action"] == hc.LEFT_ADMIN_DRAIN and "maint by admin" in decision["why"] and decision["exit_code"] == 1
    failing = parse_show_node("NodeName=node5 State=IDLE+FAIL Reason=bad psu [admin@2026-11-24T10:00:00]")["node5"]
    assert hc.decide(ECC, CONFIG, hc.HEALTHCHECK, "node5", failing)["action"] == hc.LEFT_ADMIN_DRAIN
    no_state = parse_show_node("NodeName=node6 Arch=x86_64")["node6"]
    assert hc.decide(ECC, CONFIG, hc.HEALTHCHECK, "node6", no_state)["action"] == hc.NOT_DRAINED


@pytest.mark.parametrize("text, message", [
    ('{"only": [1]}', "only: [1] is not a list of check ids (strings)"),
    ('{"exclude": [null]}', "exclude: [None] is not a list of check ids"),
    ('{"timeouts": {"total": NaN}}', "timeouts.total: nan is not a positive number of seconds"),
    ('{"timeouts": {"nvidia_smi": Infinity}}', "timeouts.nvidia_smi: inf is not a positive number of seconds"),
])
def test_check_ids_that_are_not_strings_and_timeouts_that_are_not_finite_are_one_line(text, message):
    with pytest.raises(hc.ConfigError) as info:
        hc.parse_config(text, "/etc/x.json")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_main_says_why_nothing_was_judged_on_one_line(tmp_path, capsys):
    config = tmp_path / "healthcheck.json"
    config.write_text(json.dumps({"only": ["gpu.ecc_errors"], "expect": {"nvlinks_per_pair": "x"}}))
    assert hc.main(["--config", str(config), "--dry-run", "--node", "node1"], {}) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "could not judge" in err[0] and "nvlinks_per_pair" in err[0]


def test_an_xid_79_beside_one_malformed_nvrm_line_drains_the_node(tmp_path, monkeypatch, capsys):
    # Issue 23: the real Xid 79 line in a copy of the real dmesg recording, after a copy of a real NVRM line whose
    # month is 13. journalctl and scontrol are fakes run as processes; the Xid probe, check and decision are real.
    xid_lines = read_fixture("kernel-log", "nvrm-xid-lines.txt").splitlines()
    bad = "2026-13-22T13:20:00,000000+00:00 " + xid_lines[-1].split("] ", 1)[1]
    log = "\n".join(read_fixture("kernel-log", "dmesg-iso-kvm-guest.txt").splitlines() + [
        bad, "2026-11-22T13:20:01,000000+00:00 " + xid_lines[1].split("kernel: ", 1)[1]]) + "\n"
    bindir = write_host_bin(str(tmp_path / "bins"), "node1", kernel_log=log)
    state_path = write_fake_scontrol(bindir, {"node1": ("IDLE", None)})
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % bindir)
    config = tmp_path / "healthcheck.json"
    config.write_text(json.dumps({"only": ["gpu.xid_errors"], "level": "standard", "state_dir": str(tmp_path / "state")}))
    assert hc.main(["--config", str(config)], {"SLURMD_NODENAME": "node1"}) == hc.EXIT_UNHEALTHY
    calls = read_state(state_path)["calls"]
    assert calls[-1][:3] == ["update", "nodename=node1", "state=drain"]
    assert calls[-1][3].startswith("reason=hydra: gpu.xid_errors: XID 79 (GPU has fallen off the bus)")
    with open(str(tmp_path / "state" / "healthcheck" / "last.json")) as handle:
        [xid_check] = json.load(handle)["checks"]
    assert xid_check["status"] == "FAIL" and xid_check["details"]["bad_lines"]["kernel_log"]["count"] == 1
    assert "exit 1" in capsys.readouterr().out


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file to another user")
def test_a_record_that_can_be_neither_replaced_nor_removed_is_emptied_in_place():
    # Issue 23: the program runs as a user who owns last.json but may not write its directory (a state dir of the
    # wrong owner). The stale record must not keep saying healthy: it is emptied, which check slurm.healthcheck
    # reads as no record (ERROR), never as a verdict. A real unprivileged process, a real directory.
    root = tempfile.mkdtemp(prefix="hydra-hc-", dir="/tmp")
    try:
        os.chmod(root, 0o755)
        directory = os.path.join(root, "healthcheck")
        os.mkdir(directory, 0o755)
        last = os.path.join(directory, "last.json")
        with open(last, "w") as handle:
            json.dump(hc.record(HEALTHY, hc.decide(HEALTHY, CONFIG, hc.HEALTHCHECK, "node1", None), hc.HEALTHCHECK, "node1",
                                False, "2026-11-22T08:00:00+00:00"), handle)
        nobody = pwd.getpwnam("nobody")
        os.chown(last, nobody.pw_uid, nobody.pw_gid)
        code = "import sys; from %s import write_last; print(write_last(sys.argv[1], '{}'))" % hc.__name__
        # The system Python: the test's own may live where nobody cannot read (a pyenv under /root).
        proc = subprocess.run([shutil.which("python3", path="/usr/bin:/bin"), "-c", code, last], capture_output=True, text=True,
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": os.path.join(REPO, "collections")}, timeout=60,
                              check=False, user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[])
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("cannot write %s: Permission denied; emptied the previous record in place" % last), proc.stdout
        assert os.path.getsize(last) == 0
        with pytest.raises(ProbeError, match="not a hydra-healthcheck result|not JSON"):
            last_probe.parse_last("", last, 0.0)
    finally:
        shutil.rmtree(root)

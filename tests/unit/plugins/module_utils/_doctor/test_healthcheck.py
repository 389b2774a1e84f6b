"""The node-local health check's pure part: config, exit codes, the drain decision, the reason, last.json.

Results come from doctor's run() over a real nvidia-smi recording (a copy with uncorrectable ECC errors planted
for the failing node), node states from real `scontrol show node -o` recordings of slurm-wlm 22.05.8.
"""

import json

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import healthcheck as hc
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue as probe_catalogue
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvidia_smi
from ansible_collections.continuum.hydra.plugins.module_utils._host.slurm import MAX_REASON_CHARS, drain_args, parse_show_node
from ansible_collections.continuum.hydra.tests.support.fleet import UNCORRECTABLE_ECC, fixture, plant
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

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
    (entry,) = parse_show_node(RECORDED[line_index]).values()
    return entry


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
    ('{"state_file": "last.json"}', "state_file: 'last.json' is not an absolute path"),
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

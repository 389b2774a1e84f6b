"""The healthcheck_last probe reads what hydra-healthcheck wrote (records made by the program's own record())."""

import json

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import healthcheck as hc
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import state
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import healthcheck as probe
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError

AT = "2026-11-24T12:00:00+00:00"
FAILED_RESULT = {"checks": [{"id": "gpu.ecc_errors", "status": "FAIL", "message": "GPU 0: 3 uncorrectable"},
                            {"id": "system.numa", "status": "ERROR", "message": "x"}], "level": "quick"}


def last_json(tmp_path, result=None, at=AT):
    """The program's record written where it writes it under the state dir tmp_path; returns the state dir."""
    result = result or FAILED_RESULT
    decision = {"exit_code": hc.exit_code(result), "action": hc.DRAINED, "reason": "hydra: gpu.ecc_errors: GPU 0",
                "why": "drain"}
    path = tmp_path / "healthcheck" / "last.json"
    path.parent.mkdir()
    path.write_text(json.dumps(hc.record(result, decision, hc.HEALTHCHECK, "node1", True, at)))
    return str(tmp_path)


def test_reads_the_programs_record_under_doctors_state_dir(tmp_path):
    state_dir = last_json(tmp_path)
    data = probe.probe_healthcheck_last({"state_dir": state_dir, "timeouts": {"command": 5}})
    assert data["path"] == str(tmp_path / "healthcheck" / "last.json")
    assert (data["exit_code"], data["failing"], data["erroring"], data["node"], data["drained"]) == (
        1, ["gpu.ecc_errors"], ["system.numa"], "node1", True)
    assert data["at_epoch"] == 1795521600.0 and data["read_at_epoch"] > 1795521600.0 - 365 * 86400


def test_missing_file_is_absent_and_garbage_is_an_error(tmp_path):
    with pytest.raises(ProbeAbsent):
        probe.probe_healthcheck_last({"state_dir": str(tmp_path), "timeouts": {"command": 5}})
    with pytest.raises(ProbeError, match="not JSON"):
        probe.parse_last("{", "/x/last.json", 0)
    with pytest.raises(ProbeError, match="not a hydra-healthcheck result"):
        probe.parse_last('{"exit_code": true}', "/x/last.json", 0)


def test_a_time_without_offset_is_unknown():
    assert probe.parse_last('{"exit_code": 0, "at": "2026-11-24T12:00:00"}', "/x", 0)["at_epoch"] is None


def test_the_file_the_program_writes_is_the_file_doctor_reads(tmp_path, capsys):
    """hydra-healthcheck's main() with a config naming a state_dir, then the probe with doctor's state_dir: one path."""
    config = tmp_path / "healthcheck.json"
    state_dir = tmp_path / "state"
    config.write_text(json.dumps({"only": ["driver.nvidia_smi"], "nvidia_smi_path": str(tmp_path / "no-nvidia-smi"),
                                  "state_dir": str(state_dir)}))
    code = hc.main(["--config", str(config)], {})
    assert "hydra-healthcheck: exit %d:" % code in capsys.readouterr().out
    assert sorted(p.name for p in (state_dir / "healthcheck").iterdir()) == ["last.json"]
    data = probe.probe_healthcheck_last({"state_dir": str(state_dir), "timeouts": {"command": 5}})
    assert data["exit_code"] == code and data["path"] == str(state_dir / "healthcheck" / "last.json")
    # doctor without state_dir (and the program without one) use the one default
    assert hc.normalize_config({})["state_dir"] == state.DEFAULT_STATE_DIR
    with pytest.raises(ProbeAbsent, match=state.healthcheck_last(None)):
        probe.probe_healthcheck_last({"timeouts": {"command": 5}})

"""The healthcheck_last probe reads what hydra-healthcheck wrote (records made by the program's own record())."""

import json

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import healthcheck as hc
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import healthcheck as probe
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError

AT = "2026-11-24T12:00:00+00:00"
FAILED_RESULT = {"checks": [{"id": "gpu.ecc_errors", "status": "FAIL", "message": "GPU 0: 3 uncorrectable"},
                            {"id": "system.numa", "status": "ERROR", "message": "x"}], "level": "quick"}


def last_json(tmp_path, result=None, at=AT):
    result = result or FAILED_RESULT
    decision = {"exit_code": hc.exit_code(result), "action": hc.DRAINED, "reason": "hydra: gpu.ecc_errors: GPU 0",
                "why": "drain"}
    path = tmp_path / "last.json"
    path.write_text(json.dumps(hc.record(result, decision, hc.HEALTHCHECK, "node1", True, at)))
    return str(path)


def test_reads_the_programs_record(tmp_path):
    path = last_json(tmp_path)
    data = probe.probe_healthcheck_last({"healthcheck_state_file": path, "timeouts": {"command": 5}})
    assert (data["exit_code"], data["failing"], data["erroring"], data["node"], data["drained"]) == (
        1, ["gpu.ecc_errors"], ["system.numa"], "node1", True)
    assert data["at_epoch"] == 1795521600.0 and data["read_at_epoch"] > 1795521600.0 - 365 * 86400


def test_missing_file_is_absent_and_garbage_is_an_error(tmp_path):
    with pytest.raises(ProbeAbsent):
        probe.probe_healthcheck_last({"healthcheck_state_file": str(tmp_path / "none.json"), "timeouts": {"command": 5}})
    with pytest.raises(ProbeError, match="not JSON"):
        probe.parse_last("{", "/x/last.json", 0)
    with pytest.raises(ProbeError, match="not a hydra-healthcheck result"):
        probe.parse_last('{"exit_code": true}', "/x/last.json", 0)


def test_a_time_without_offset_is_unknown():
    assert probe.parse_last('{"exit_code": 0, "at": "2026-11-24T12:00:00"}', "/x", 0)["at_epoch"] is None

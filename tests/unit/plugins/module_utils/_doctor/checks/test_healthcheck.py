"""slurm.healthcheck: what the node-local program last judged, as a pure function of the probe's data."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import healthcheck as probe

AT = "2026-11-24T12:00:00+00:00"
AT_EPOCH = 1795521600.0


def judge(envelope, expect=None):
    chk = [c for c in CATALOGUE if c.id == "slurm.healthcheck"][0]
    assert chk.level == "quick"
    return registry.evaluate(chk, {"healthcheck_last": envelope}, expect or {})


def last(exit_code, age_s, failing=("gpu.ecc_errors",), at=AT):
    text = '{"exit_code": %d, "at": "%s", "reason": "hydra: gpu.ecc_errors: GPU 0", "checks": [%s]}' % (
        exit_code, at, ", ".join('{"id": "%s", "status": "FAIL"}' % i for i in failing))
    return {"status": "ok", "data": probe.parse_last(text, "/var/lib/x/last.json", AT_EPOCH + age_s), "reason": None}


@pytest.mark.parametrize("exit_code, age_s, expect, status, words", [
    (1, 600, None, "FAIL", "unhealthy 10 min ago (hydra: gpu.ecc_errors: GPU 0)"),
    (1, 30 * 3600, None, "WARN", "older than 24 h"),
    (1, 30 * 3600, {"healthcheck_max_age_hours": 48}, "FAIL", "30.0 h ago"),
    (2, 60, None, "WARN", "could not judge"),
    (0, 60, None, "PASS", "healthy 60 s ago"),
    (0, 25 * 3600, None, "WARN", "is it still run"),
])
def test_last_verdict_and_age(exit_code, age_s, expect, status, words):
    record = judge(last(exit_code, age_s), expect)
    assert record["status"] == status and words in record["message"], record["message"]


def test_no_readable_time_is_stale_and_no_file_is_skip():
    assert judge(last(0, 0, at="yesterday"))["status"] == "WARN"
    assert judge({"status": "absent", "data": None, "reason": "/var/lib/x/last.json does not exist"})["status"] == "SKIP"
    assert judge({"status": "failed", "data": None, "reason": "not JSON"})["status"] == "ERROR"

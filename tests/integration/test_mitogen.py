"""playbooks/doctor.yml under Mitogen's strategy (docs/performance.md) gives the same per-host results as the
default strategy: a real ansible-playbook run of each over three simulated local hosts.

Needs mitogen importable by the Python running Ansible (tests/requirements.txt pins the version known to work);
skipped, saying so, when it is not. Nothing is installed here."""

import importlib.util
import os

import pytest

from ansible_collections.continuum.hydra.tests.support.fleet import (
    GPU_ONLY,
    MACHINE_BOUND,
    PERSISTENCE_ON,
    UNCORRECTABLE_ECC,
    fixture,
    host_vars,
    plant,
    run_playbook,
    write_host_bin,
)

pytestmark = pytest.mark.integration


def _strategy_dir():
    spec = importlib.util.find_spec("ansible_mitogen")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("mitogen is not importable by this Python: pip install mitogen==0.3.54 (tests/requirements.txt) "
                    "to run doctor.yml under strategy mitogen_linear")
    return os.path.join(list(spec.submodule_search_locations)[0], "plugins", "strategy")


def _outcomes(report):
    return dict((host, (entry["status"], [(c["id"], c["status"]) for c in entry["doctor"]["checks"]]))
                for host, entry in report["hosts"].items())


def test_doctor_under_mitogen_linear_matches_the_default_strategy(tmp_path, monkeypatch):
    strategy_dir = _strategy_dir()
    a100 = fixture("a100-sxm4-v12.xml")
    hosts = {
        "ok": host_vars(write_host_bin(str(tmp_path), "ok", plant(a100, PERSISTENCE_ON))),
        "ecc": host_vars(write_host_bin(str(tmp_path), "ecc", plant(a100, PERSISTENCE_ON, UNCORRECTABLE_ECC))),
        "persistence-off": host_vars(write_host_bin(str(tmp_path), "persistence-off", a100)),
    }
    extra = {"hydra_only": GPU_ONLY, "hydra_exclude": MACHINE_BOUND}
    reports = {}
    for name, strategy in (("linear", None), ("mitogen", "mitogen_linear")):
        report_dir = str(tmp_path / name)
        os.makedirs(report_dir)
        if strategy:
            monkeypatch.setenv("ANSIBLE_STRATEGY_PLUGINS", strategy_dir)
            monkeypatch.setenv("ANSIBLE_STRATEGY", strategy)
        proc, reports[name] = run_playbook({"all": {"hosts": hosts}}, report_dir, extra_vars=extra)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert reports[name] is not None, proc.stdout[-3000:]
    assert _outcomes(reports["mitogen"]) == _outcomes(reports["linear"])
    # and the results are doctor's real verdicts on the planted faults, not two identical failures
    checks = dict((host, dict(outcome[1])) for host, outcome in _outcomes(reports["mitogen"]).items())
    assert checks["ecc"]["gpu.ecc_errors"] == "FAIL" and checks["ok"]["gpu.ecc_errors"] == "PASS"
    assert checks["persistence-off"]["gpu.persistence_mode"] == "WARN" and checks["ok"]["gpu.persistence_mode"] == "PASS"
    assert reports["mitogen"]["hosts"]["ecc"]["status"] == "failed"

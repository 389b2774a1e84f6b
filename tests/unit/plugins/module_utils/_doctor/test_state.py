"""One state directory: doctor's state_dir default, tenant.slo's and the health check's files under it."""

import os

import pytest
import yaml

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import state, tenants
from ansible_collections.continuum.hydra.plugins.modules import doctor
from ansible_collections.continuum.hydra.tests.support.helpers import REPO


class _Captured(Exception):
    pass


def test_the_doctor_modules_state_dir_default_is_the_constant(monkeypatch):
    captured = {}

    def module(argument_spec, **kwargs):
        captured.update(argument_spec)
        raise _Captured()

    monkeypatch.setattr(doctor, "AnsibleModule", module)
    with pytest.raises(_Captured):
        doctor.main()
    assert captured["state_dir"]["default"] == state.DEFAULT_STATE_DIR
    assert yaml.safe_load(doctor.DOCUMENTATION)["options"]["state_dir"]["default"] == state.DEFAULT_STATE_DIR
    assert tenants.DEFAULT_STATE_DIR is state.DEFAULT_STATE_DIR


def test_the_health_checks_file_under_a_state_dir():
    assert state.healthcheck_last("/srv/hydra") == "/srv/hydra/healthcheck/last.json"
    assert state.healthcheck_last(None) == state.healthcheck_last("") == "/var/lib/continuum-hydra/healthcheck/last.json"


def test_the_role_defaults_agree():
    with open(os.path.join(REPO, "roles", "slurm_healthcheck", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    with open(os.path.join(REPO, "roles", "tenant_guard", "defaults", "main.yml")) as handle:
        guard = yaml.safe_load(handle)
    assert defaults["slurm_healthcheck_state_dir"] == guard["tenant_guard_state_dir"] == state.DEFAULT_STATE_DIR
    assert "slurm_healthcheck_state_file" not in defaults

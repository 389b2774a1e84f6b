"""The env_setup module's main() with real pip: check mode, diff mode, idempotence, one-line failures."""

import json
import os
import shutil

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.continuum.hydra.plugins.modules import env_setup


def _main(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exc:
            env_setup.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


@pytest.fixture
def venv(template_venv, tmp_path):
    path = tmp_path / "venv"
    shutil.copytree(str(template_venv), str(path), symlinks=True)
    return str(path)


def test_check_mode_with_diff_shows_the_pinned_set_and_creates_nothing(capsys, tmp_path):
    venv = str(tmp_path / "venv")
    code, out = _main(capsys, venv=venv, numpy_spec="six==1.16.0", _ansible_check_mode=True, _ansible_diff=True)
    assert code == 0 and out["changed"] is True and out["venv_created"] is True
    assert out["changes"] == [{"name": "six", "before": None, "after": "1.16.0", "action": "install"}]
    assert out["diff"] == {"before": "", "after": "six==1.16.0\n", "before_header": "%s (pinned packages)" % venv,
                           "after_header": "%s (pinned packages)" % venv}
    assert not os.path.exists(venv)


def test_a_second_run_is_not_changed_and_diff_is_only_returned_when_asked(capsys, venv):
    code, first = _main(capsys, venv=venv, numpy_spec="six==1.16.0")
    assert code == 0 and first["changed"] is True and "diff" not in first
    assert first["manifest"]["kind"] == "continuum.hydra.env_manifest"
    assert {"name": "six", "version": "1.16.0"} in first["manifest"]["packages"]
    code, second = _main(capsys, venv=venv, numpy_spec="six==1.16.0", _ansible_diff=True)
    assert code == 0 and second["changed"] is False and second["written"] == []
    assert second["diff"]["before"] == second["diff"]["after"]


def test_bad_spec_fails_with_one_line_and_nothing_changed(capsys, venv):
    code, out = _main(capsys, venv=venv, numpy_spec="numpy>>=1")
    assert code == 1 and out["failed"] is True and out["changed"] is False
    assert out["msg"].startswith("numpy_spec 'numpy>>=1' is not a valid requirement") and "\n" not in out["msg"]


def test_pip_failure_carries_pip_output(capsys, venv):
    code, out = _main(capsys, venv=venv, numpy_spec="hydra-no-such-package-xyz")
    assert code == 1 and out["changed"] is False
    assert out["msg"] == ("pip install of numpy_spec 'hydra-no-such-package-xyz' failed (rc=1): "
                          "No matching distribution found for hydra-no-such-package-xyz")
    assert out["pip_output"]["rc"] == 1 and out["pip_output"]["command"][-1] == "hydra-no-such-package-xyz"


def test_the_argument_spec_rejects_unknown_options_and_types(capsys, venv):
    code, out = _main(capsys, venv=venv, pip_timeout="soon")
    assert code == 1 and "pip_timeout" in out["msg"]
    code, out = _main(capsys, venv=venv, torch_version="2.5")
    assert code == 1 and "torch_version" in out["msg"]

"""When the fleet_report callback warns that an AWX job would lose its reports (docs/awx.md, Storage)."""

import pytest

from ansible_collections.continuum.hydra.plugins.plugin_utils._callback_settings import (
    awx_storage_warning,
    private_data_dirs,
    under_awx,
)

# What runner gives a job in the execution environment (research note: AWX tasks/jobs.py build_env, runner config).
EE_ENV = {"JOB_ID": "4711", "AWX_HOST": "https://awx.example.com", "AWX_PRIVATE_DATA_DIR": "/tmp/awx_4711_k2j3h4",
          "AWX_ISOLATED_DATA_DIR": "/runner/artifacts/4711"}


@pytest.mark.parametrize("extra_vars, environ, expected", [
    ({"awx_job_id": 4711}, {}, True),
    ({"tower_job_id": "4711"}, {}, True),
    ({}, {"AWX_PRIVATE_DATA_DIR": "/tmp/awx_1_x"}, True),
    ({}, {"AWX_ISOLATED_DATA_DIR": "/runner/artifacts/1"}, True),
    ({}, {"JOB_ID": "1", "AWX_HOST": "https://awx"}, True),
    ({}, {"JOB_ID": "1"}, False),  # a CI system's JOB_ID alone is not AWX
    ({"awx_job_id": ""}, {}, False),
    ({"hydra_only": ["gpu"]}, {"HOME": "/root"}, False),
])
def test_under_awx_from_extra_vars_or_environment(extra_vars, environ, expected):
    assert under_awx(extra_vars, environ) is expected


def test_the_default_relative_report_dir_in_an_execution_environment_is_one_warning_naming_both_paths():
    line = awx_storage_warning("./reports", {"awx_job_id": 4711}, EE_ENV, "/runner/project")
    assert line is not None and "\n" not in line
    assert line.startswith("report_dir /runner/project/reports is inside this AWX job's private data dir /runner,")
    assert "AWX_ISOLATION_SHOW_PATHS" in line and "HYDRA_REPORT_DIR" in line


def test_a_shared_mounted_path_is_no_warning():
    assert awx_storage_warning("/srv/hydra/reports", {"awx_job_id": 4711}, EE_ENV, "/runner/project") is None


def test_outside_awx_nothing_is_said_whatever_the_path():
    assert awx_storage_warning("./reports", {}, {"HOME": "/root"}, "/runner/project") is None


def test_a_job_run_directly_on_the_node_warns_for_its_mkdtemp_private_dir():
    # No container: cwd is <private data dir>/project on the node, AWX_PRIVATE_DATA_DIR names it.
    env = {"JOB_ID": "12", "AWX_HOST": "https://awx", "AWX_PRIVATE_DATA_DIR": "/tmp/awx_12_abcd"}
    line = awx_storage_warning("reports", {}, env, "/tmp/awx_12_abcd/project")
    assert line is not None and "private data dir /tmp/awx_12_abcd," in line
    # Only the extra var, no environment: the awx_<id>_ directory name says it.
    line = awx_storage_warning("reports", {"awx_job_id": 12}, {}, "/tmp/awx_12_abcd/project")
    assert line is not None and "private data dir /tmp/awx_12_abcd," in line


def test_private_data_dirs_come_from_runner_and_awx_variables():
    dirs = private_data_dirs(EE_ENV, "/runner/project")
    assert dirs[:2] == ["/tmp/awx_4711_k2j3h4", "/runner"] and "/runner" in dirs


def test_a_sibling_path_sharing_the_prefix_is_not_inside():
    assert awx_storage_warning("/runnerstore/reports", {"awx_job_id": 1}, {}, "/runner/project") is None

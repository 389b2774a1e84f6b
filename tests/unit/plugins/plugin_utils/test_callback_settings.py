"""The fleet_report callback's settings checked (each bad one a problem line and a fallback), and when it warns that an
AWX job would lose its reports (docs/awx.md, Storage)."""

import pytest

from ansible_collections.continuum.hydra.plugins.plugin_utils._callback_settings import (
    awx_storage_warning,
    private_data_dirs,
    read_settings,
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


# The option values as Ansible hands them to the callback (types converted, the DOCUMENTATION's defaults).
DEFAULTS = {"report_dir": "/srv/reports", "formats": ["json", "markdown", "html", "junit", "prometheus"],
            "history_dir": None, "history_keep": 10, "state_lock_timeout": 60.0, "straggler_history_runs": 3,
            "straggler_rule": [], "class_groups": [], "expected_versions": None, "batch_global_size": None,
            "batch_memory_per_sample_mib": None, "batch_metric": "bf16_tflops", "placement_threshold": 60.0}


def test_the_defaults_are_read_as_given_with_history_under_the_report_dir():
    problems = []
    settings = read_settings(DEFAULTS.get, problems)
    assert problems == []
    assert settings == {"report_dir": "/srv/reports", "formats": DEFAULTS["formats"], "history_keep": 10,
                        "state_lock_timeout": 60.0, "straggler_history_runs": 3, "straggler_rule": {}, "history_dir": "/srv/reports/history",
                        "class_groups": [], "expected": None, "batch": None, "placement_threshold": 60.0}


def test_each_bad_setting_is_one_problem_line_and_a_fallback_that_does_less(tmp_path):
    bad_expected = tmp_path / "expected.yml"
    bad_expected.write_text("driver_version: [\n")
    options = dict(DEFAULTS, formats=[" json ", "pdf"], history_keep=-1, straggler_history_runs=-2,
                   state_lock_timeout=float("inf"), expected_versions=str(bad_expected), batch_global_size=0,
                   placement_threshold=150, class_groups=["rack_b", 7], straggler_rule=["history_run_z=-1.8", "robust_z=lots"])
    problems = []
    settings = read_settings(options.get, problems)
    assert settings["formats"] == ["json"] and settings["history_keep"] == 0 and settings["straggler_history_runs"] == 0
    assert settings["state_lock_timeout"] == 60 and settings["expected"] is None and settings["batch"] is None
    assert settings["placement_threshold"] == 60 and settings["class_groups"] == ["rack_b", "7"]
    assert settings["straggler_rule"] == {}
    assert len(problems) == 8 and all("\n" not in line for line in problems)
    assert problems[0] == "formats: 'pdf' unknown; accepted: json, markdown, html, junit, prometheus"
    assert problems[1] == "history_keep: -1 is not a number of runs (0 or more); history is off"
    assert problems[3] == "straggler_rule: 'robust_z=lots': 'lots' is not a number; using the default rule"
    assert problems[4].startswith("expected_versions: ") and problems[4].endswith("drift is judged against the class majority")
    assert problems[5].endswith("; no batch plan") and problems[6].endswith("; using 60")
    assert problems[7] == "state_lock_timeout: inf is not a number of seconds (0 or more); using 60"


def test_a_batch_plan_setting_and_an_expected_versions_file_are_taken(tmp_path):
    expected = tmp_path / "expected.yml"
    expected.write_text("driver_version: 550.54.15\n")
    options = dict(DEFAULTS, batch_global_size=4096, batch_memory_per_sample_mib=512.0, history_dir="/srv/history",
                   expected_versions=str(expected))
    problems = []
    settings = read_settings(options.get, problems)
    assert problems == [] and settings["history_dir"] == "/srv/history"
    assert settings["batch"] == {"global_batch_size": 4096, "memory_per_sample_mib": 512.0, "metric": "bf16_tflops"}
    assert settings["expected"] == {"all": {"driver_version": ["550.54.15"]}, "classes": {}}


def test_straggler_rule_values_are_taken_and_the_runs_have_their_own_setting():
    problems = []
    settings = read_settings(dict(DEFAULTS, straggler_rule=[" history_run_z = -1.8", "tail_quantile=0"], straggler_history_runs=5).get, problems)
    assert problems == [] and settings["straggler_rule"] == {"history_run_z": -1.8, "tail_quantile": 0.0}
    settings = read_settings(dict(DEFAULTS, straggler_rule=["history_runs=5"]).get, problems)
    assert settings["straggler_rule"] == {} and problems == [
        "straggler_rule: 'history_runs=5': the number of runs is straggler_history_runs, not a rule value; using the default rule"]
    problems = []
    read_settings(dict(DEFAULTS, straggler_rule=["robust-z=-3", "ratio_floor=nan"]).get, problems)
    assert problems[0].startswith("straggler_rule: 'robust-z=-3' is not KEY=NUMBER with KEY one of history_every_z, ")

"""The fleet_report callback's settings, through real ansible-playbook runs of playbooks/doctor.yml over a
simulated fleet (tests/support/fleet.py): classes by inventory group, an expected-versions file, two
runs of history with a repeat-offender GPU, every format written and valid, AWX set_stats data, and bad
settings that cost a line, never the report."""

import json
import os
import re
import shutil
import subprocess

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
from ansible_collections.continuum.hydra.tests.support.helpers import REPO
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import schema_validator

pytestmark = pytest.mark.integration

HOSTILE = 'gpu<&>"x'
NEW_DRIVER = (r"<driver_version>535.54.03</driver_version>", "<driver_version>550.54.15</driver_version>", 1)
EXPECTED = """# golden values for every class, and per class
cuda_driver_version: "12.2"
classes:
  rack_b:
    driver_version: 535.54.03
"""
FORMAT_FILES = ["fleet-report.html", "fleet-report.json", "fleet-report.junit.xml", "fleet-report.md", "fleet-report.prom"]


def _inventory(root):
    a100, t4 = fixture("a100-sxm4-v12.xml"), fixture("tesla-t4.xml")
    hosts = {
        "a100-1": host_vars(write_host_bin(root, "a100-1", plant(a100, PERSISTENCE_ON))),
        "a100-2": host_vars(write_host_bin(root, "a100-2", plant(a100, PERSISTENCE_ON))),
        "a100-3": host_vars(write_host_bin(root, "a100-3", plant(a100, PERSISTENCE_ON, NEW_DRIVER))),
        "a100-4": host_vars(write_host_bin(root, "a100-4", plant(a100, PERSISTENCE_ON, UNCORRECTABLE_ECC))),
        HOSTILE: host_vars(write_host_bin(root, "hostile", plant(a100, PERSISTENCE_ON))),
        "t4-1": host_vars(write_host_bin(root, "t4-1", plant(t4, PERSISTENCE_ON))),
        "unreachable": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1,
                        "ansible_ssh_common_args": "-o ConnectTimeout=5 -o StrictHostKeyChecking=no"},
    }
    return {"all": {"hosts": hosts, "children": {"rack_b": {"hosts": {"a100-1": {}, "a100-2": {}}}}}}


def _run(inventory, report_dir, env, extra_vars=None):
    os.makedirs(report_dir, exist_ok=True)
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        return run_playbook(inventory, report_dir, extra_vars=dict({"hydra_only": GPU_ONLY, "hydra_exclude": MACHINE_BOUND},
                                                                   **(extra_vars or {})))
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _custom_stats(stdout):
    match = re.search(r"RUN: (\{.*\})\s*$", stdout, re.MULTILINE)
    assert match, "no custom stats in the output"
    return json.loads(match.group(1))


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("report-fleet"))
    inventory = _inventory(root)
    expected = os.path.join(root, "expected.yml")
    with open(expected, "w") as handle:
        handle.write(EXPECTED)
    report_dir = os.path.join(root, "reports")
    env = {"HYDRA_CLASS_GROUPS": "rack_b", "HYDRA_EXPECTED_VERSIONS": expected, "HYDRA_HISTORY_KEEP": "2",
           "HYDRA_STRAGGLER_RULE": "history_sudden_ratio=0.5, robust_z=-4", "ANSIBLE_SHOW_CUSTOM_STATS": "1"}
    first = _run(inventory, report_dir, env)
    second = _run(inventory, report_dir, env)
    for proc, report in (first, second):
        assert report is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"root": root, "inventory": inventory, "report_dir": report_dir, "first": first, "second": second}


def test_the_straggler_rule_setting_reaches_the_analysis(two_runs):
    rule = two_runs["second"][1]["analysis"]["stragglers"]["rule"]
    assert rule["history_sudden_ratio"] == 0.5 and rule["robust_z"] == -4.0 and rule["history_runs"] == 3


def test_classes_come_from_the_inventory_group_then_from_hardware(two_runs):
    report = two_runs["second"][1]
    classes = report["analysis"]["classes"]
    assert classes["rack_b"]["hosts"] == ["a100-1", "a100-2"] and classes["rack_b"]["basis"] == "group"
    automatic = dict((name, info["hosts"]) for name, info in classes.items() if info["basis"] == "hardware")
    a100 = [n for n in automatic if n.startswith("1x NVIDIA A100-SXM4-80GB | ")]
    t4 = [n for n in automatic if n.startswith("1x Tesla T4 | ")]
    assert len(automatic) == 2 and automatic[a100[0]] == sorted(["a100-3", "a100-4", HOSTILE]) and automatic[t4[0]] == ["t4-1"]
    assert report["analysis"]["unclassified"] == ["unreachable"]
    assert report["hosts"]["a100-1"]["class"] == "rack_b"


def test_drift_against_the_majority_and_the_expected_versions_file(two_runs):
    drift = two_runs["second"][1]["analysis"]["drift"]
    assert sorted((i["host"], i["field"], i["value"], i["reference"], i["basis"]) for i in drift["items"]) == [
        ("a100-3", "driver_version", "550.54.15", "535.54.03", "majority"),
        ("t4-1", "cuda_driver_version", "11.7", "12.2", "expected"),
    ]
    assert drift["pinned"] == ["cuda_driver_version", "driver_version"]


def test_history_finds_the_gpu_that_failed_in_both_runs(two_runs):
    first, second = two_runs["first"][1], two_runs["second"][1]
    assert first["analysis"]["history"]["runs"] == 1 and first["analysis"]["history"]["repeat_offenders"] == []
    offenders = second["analysis"]["history"]["repeat_offenders"]
    uuid = second["failing"]["gpu.ecc_errors"][0]["gpus"][0]["uuid"]
    assert [(o["kind"], o["host"], o["uuid"], o["runs_failed"], o["runs"], o["offences"], o["failing_now"]) for o in offenders] == [
        ("gpu", "a100-4", uuid, 2, 2, ["gpu.ecc_errors"], True)]
    assert "REPEAT a100-4 GPU 0 %s: failed in 2 of 2 runs (gpu.ecc_errors)" % uuid in two_runs["second"][0].stdout
    state_files = ("findings.json", "findings.json.lock", "fleet-history.lock")  # the findings store, the locks
    snapshots = [n for n in os.listdir(os.path.join(two_runs["report_dir"], "history")) if n not in state_files]
    assert len(snapshots) == 2 and all(n.startswith("fleet-history-") for n in snapshots)


def test_every_format_is_written_and_valid(two_runs, tmp_path):
    report_dir = two_runs["report_dir"]
    files = sorted(os.listdir(report_dir))
    assert [f for f in files if f in FORMAT_FILES] == FORMAT_FILES
    assert len([f for f in files if re.match(r"^fleet-report-\d{8}T\d{6}\.\d{6}Z\.json$", f)]) == 2
    assert not [f for f in files if f.endswith(".tmp")]
    report = two_runs["second"][1]
    assert not list(schema_validator().iter_errors(report))
    assert HOSTILE in report["hosts"] and report["totals"]["hosts"] == 7
    with open(os.path.join(report_dir, "fleet-report.html"), encoding="utf-8") as handle:
        assert 'data-host="gpu&lt;&amp;&gt;&quot;x"' in handle.read()
    with open(os.path.join(report_dir, "fleet-report.prom"), encoding="utf-8") as handle:
        assert 'hydra_host_status{host="gpu<&>\\"x",class=' in handle.read()
    if shutil.which("xmllint"):
        proc = subprocess.run(["xmllint", "--noout", "--schema", os.path.join(REPO, "schemas", "junit.xsd"),
                               os.path.join(report_dir, "fleet-report.junit.xml")], capture_output=True, text=True, timeout=60,
                              check=False)
        assert proc.returncode == 0, proc.stderr


def test_set_stats_publishes_the_summary_awx_workflows_branch_on(two_runs):
    stats = _custom_stats(two_runs["second"][0].stdout)["hydra_fleet"]
    report = two_runs["second"][1]
    assert stats["failing_hosts"] == ["a100-4", "unreachable"]
    assert stats["failing_checks"] == {"gpu.ecc_errors": 1} and stats["ok"] is False
    assert stats["totals"] == report["totals"]


def test_bad_settings_are_reported_and_the_report_is_still_written(two_runs):
    root = two_runs["root"]
    bad_expected = os.path.join(root, "bad-expected.yml")
    with open(bad_expected, "w") as handle:
        handle.write("driver: 535\n")
    report_dir = os.path.join(root, "bad-settings")
    proc, report = _run(two_runs["inventory"], report_dir,
                        {"HYDRA_REPORT_FORMATS": "json,pdf", "HYDRA_EXPECTED_VERSIONS": bad_expected, "HYDRA_BATCH_GLOBAL_SIZE": "0",
                         "HYDRA_PLACEMENT_THRESHOLD": "150"},
                        extra_vars={"hydra_hosts": "a100-1"})
    assert report is not None and report["totals"]["hosts"] == 1
    assert [f for f in os.listdir(report_dir) if f in FORMAT_FILES] == ["fleet-report.json"]
    assert report["analysis"]["problems"] == [
        "formats: 'pdf' unknown; accepted: json, markdown, html, junit, prometheus",
        "expected_versions: %s: unknown field 'driver'; accepted: gpu_count, driver_version, cuda_driver_version, rocm_version, "
        "vbios_version, kernel, torch_version, nccl_version, nccl_env, persistence_mode, ecc_mode, mig_mode, pcie_gen, pcie_width; "
        "drift is judged against the class majority" % bad_expected,
        "batch_global_size: 0 is not a positive integer number of samples; no batch plan",
        "placement_threshold: 150.0 is not a score from 0 to 100; using 60",
    ]
    output = re.sub(r"\s+", " ", proc.stdout + proc.stderr)
    assert "continuum.hydra.fleet_report: formats: 'pdf' unknown" in output
    assert "PROBLEM batch_global_size: 0 is not a positive integer number of samples; no batch plan" in output


def test_a_value_of_the_wrong_type_falls_back_to_the_defaults(two_runs):
    report_dir = os.path.join(two_runs["root"], "wrong-type")
    proc, report = _run(two_runs["inventory"], report_dir, {"HYDRA_HISTORY_KEEP": "ten"}, extra_vars={"hydra_hosts": "a100-1"})
    assert report is not None
    assert [f for f in sorted(os.listdir(report_dir)) if f in FORMAT_FILES] == FORMAT_FILES
    # the other settings (HYDRA_REPORT_DIR among them) still apply
    assert report["analysis"]["problems"] == [
        "settings: Config 'history_keep' for 'ansible_collections.continuum.hydra.plugins.callback.fleet_report' callback plugin "
        "from 'env: HYDRA_HISTORY_KEEP' has an invalid value: Invalid value provided for 'int': 'ten'; using the default 10"]

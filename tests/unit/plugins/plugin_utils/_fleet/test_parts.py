"""plugin_utils/_fleet/parts.py: slice parts and their merge (pure)."""

import json

import pytest

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import parts
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import MISSING, TASK_FAILED, FleetCollector, build_report


def _part(workflow, job, hosts, inventory=None):
    collector = FleetCollector()
    for name, status in hosts.items():
        collector.add_task_failed(name, "boom") if status == TASK_FAILED else collector.add_unreachable(name, "down")
    return json.dumps(parts.build_part(collector.hosts, inventory or list(hosts), {}, workflow, job, "2026-11-22T13:00:00+00:00",
                                       "doctor.yml"))


def test_merge_marks_hosts_in_no_part_missing_and_counts_them():
    problems = []
    merged = parts.merge([("a", _part("77", "1", {"h1": TASK_FAILED})), ("b", _part("77", "2", {"h2": "unreachable"}))], {},
                         "77", ["h1", "h2", "h3"], problems)
    assert problems == []
    assert merged["hosts"]["h1"]["status"] == TASK_FAILED
    assert merged["hosts"]["h3"]["status"] == MISSING
    assert merged["merge"]["jobs"] == ["1", "2"] and merged["merge"]["missing"] == 1
    report = build_report(merged["hosts"], None)
    assert report["totals"][MISSING] == 1 and report["totals"]["hosts"] == 3


def test_other_workflow_ignored_and_corrupt_part_is_one_problem():
    problems = []
    merged = parts.merge([("other", _part("78", "9", {"h1": TASK_FAILED})), ("bad.json", "{not json")], {}, "77", ["h1"], problems)
    assert merged["merge"]["ignored"] == ["other"]
    assert merged["hosts"]["h1"]["status"] == MISSING
    assert len(problems) == 1 and "bad.json" in problems[0]


def test_artifact_summary_used_when_no_file_and_file_wins():
    summary = parts.part_summary({"ok": False}, {"h1": TASK_FAILED, "h2": "healthy"}, "77", "3")
    key = parts.stats_key("3")
    assert list(summary) == [key]
    merged = parts.merge([], summary, "77", ["h1", "h2"], [])
    assert merged["hosts"]["h2"]["status"] == "healthy" and merged["merge"]["from_stats"] == [key]
    merged = parts.merge([("f", _part("77", "3", {"h1": "unreachable"}))], summary, "77", ["h1", "h2"], [])
    assert merged["hosts"]["h1"]["status"] == "unreachable" and merged["hosts"]["h2"]["status"] == MISSING
    problems = []
    parts.merge([], {parts.stats_key("4"): {"job_id": "4", "workflow_job_id": "77", "host_statuses": {"h": "bogus"}}}, "77", [], problems)
    assert len(problems) == 1 and parts.stats_key("4") in problems[0]


def test_slice_host_without_result_is_missing_with_its_job():
    merged = parts.merge([("a", _part("77", "1", {"h1": TASK_FAILED}, ["h1", "h2"]))], {}, "77", [], [])
    assert merged["hosts"]["h2"]["status"] == MISSING and "job 1" in merged["hosts"]["h2"]["message"]


@pytest.mark.parametrize("value", ["../x", "", None, True, "a/b"])
def test_clean_id_refuses_path_like_ids(value):
    with pytest.raises(parts.PartError):
        parts.clean_id(value, "id")


def test_part_path():
    assert parts.part_path("r", "77", "5").endswith("r/parts/77/job-5.json")

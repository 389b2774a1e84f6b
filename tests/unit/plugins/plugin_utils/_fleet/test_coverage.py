"""Screening rotation and coverage (issue 27 item 3): which nodes a run screens, which are overdue and by how long, and
the store beside the history (read, recorded under its lock, an unusable one kept aside)."""

import datetime
import json
import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import screen
from ansible_collections.continuum.hydra.plugins.module_utils._status import NOT_SCREENED
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import coverage, state_files

NOW = datetime.datetime(2026, 11, 26, 12, 0, tzinfo=datetime.timezone.utc)


def ago(days):
    return (NOW - datetime.timedelta(days=days)).isoformat(timespec="seconds")


def store_of(**last_days):
    return {"version": 1, "nodes": dict((host, {"last_screened": None if days is None else ago(days)})
                                        for host, days in last_days.items())}


def test_never_screened_first_then_the_longest_ago():
    store = store_of(a=1.0, b=9.0, c=None, d=3.0)
    assert coverage.choose(["a", "b", "c", "d", "e"], store, 3) == ["c", "e", "b"]
    assert coverage.choose(["a", "b", "c", "d", "e"], store, 10) == ["c", "e", "b", "d", "a"]


def test_coverage_names_the_overdue_by_how_long_and_the_never_screened():
    store = store_of(a=1.0, b=9.5, c=None, d=8.0)
    section = coverage.coverage(store, ["a", "b", "c", "d", "e"], {}, 7, NOW)
    assert section["within"] == 1 and section["nodes"] == 5 and section["covered"] is False
    assert section["overdue"] == [{"host": "b", "last_screened": ago(9.5), "overdue_by_s": 2.5 * 86400},
                                  {"host": "d", "last_screened": ago(8.0), "overdue_by_s": 86400}]
    assert section["never"] == ["c", "e"]
    assert coverage.overdue_line(section) == ("screening: 1 of 5 nodes screened within 7 days; 2 overdue (longest: b by 2.5 "
                                              "days); 2 never screened (c, e)")
    assert coverage.coverage(store_of(a=1.0), ["a"], {}, 7, NOW)["covered"] is True


def test_a_run_records_its_screens_and_a_busy_node_keeps_its_last_screen():
    store = store_of(a=9.0, b=3.0)
    screens = {"a": {"screened": True, "ended_at": NOW.isoformat(), "status": "healthy", "job_id": "12"},
               "b": {"screened": False, "reason": "node node2: screening job 13 did not start", "job_id": "13"}}
    after = coverage.record(store, screens, NOW.isoformat())
    assert after["nodes"]["a"]["last_screened"] == NOW.isoformat() and after["nodes"]["a"]["status"] == "healthy"
    assert after["nodes"]["b"]["last_screened"] == ago(3.0) and after["nodes"]["b"]["status"] == NOT_SCREENED
    assert after["nodes"]["b"]["reason"].startswith("node node2") and store["nodes"]["a"]["last_screened"] == ago(9.0)


def test_a_screen_whose_job_gave_no_result_is_not_coverage():
    # sbatch failed (or the job died): the report has the node ERROR, but the node was not judged, so it keeps its
    # last screen and stays first in the rotation.
    failed = screen.error_result("the screening job could not be submitted: sbatch: rc 1: Invalid partition", {"job_id": None})
    assert failed["overall_status"] != "healthy" and failed["screen"]["screened"] is True
    after = coverage.record(store_of(a=1.0, b=3.0), {"b": failed["screen"]}, NOW.isoformat())
    assert after["nodes"]["b"]["last_screened"] == ago(3.0) and after["nodes"]["b"]["status"] == NOT_SCREENED
    assert coverage.choose(["a", "b"], after, 1) == ["b"]


def test_the_store_is_written_under_its_lock_and_an_unusable_one_is_kept_aside(tmp_path):
    path = coverage.store_path(str(tmp_path))
    store, problems = coverage.update_store(path, {"a": {"screened": True, "status": "healthy"}}, NOW)
    assert problems == [] and json.load(open(path))["nodes"]["a"]["status"] == "healthy"
    with open(path, "w") as handle:
        handle.write('{"version": 1, "nodes": {"a": {"last_screened": "yesterday"}}}')
    store, problems = coverage.update_store(path, {"b": {"screened": True}}, NOW)
    aside = [name for name in os.listdir(str(tmp_path)) if name.startswith(coverage.STORE_NAME + ".bad-")]
    assert len(aside) == 1 and "is unusable (node 'a'" in problems[0] and sorted(store["nodes"]) == ["b"]
    with state_files.locked(path, 1):
        store, problems = coverage.update_store(path, {"c": {"screened": True}}, NOW, lock_wait_s=0.2)
    assert "not updated" in problems[0] and "locked by another run" in problems[0]
    assert "c" in store["nodes"] and "c" not in json.load(open(path))["nodes"]  # this run reported, nothing written


@pytest.mark.parametrize("max_nodes, max_age, message", [
    (0, 7, "max_nodes: 0 is not a whole number >= 1"),
    (3, 0, "max_age_days: 0 is not a positive number of days"),
    (3, float("nan"), "max_age_days: nan is not a positive number of days"),
])
def test_bad_settings_are_one_line(max_nodes, max_age, message):
    with pytest.raises(coverage.CoverageError) as caught:
        coverage.check_settings(max_nodes, max_age)
    assert str(caught.value) == message

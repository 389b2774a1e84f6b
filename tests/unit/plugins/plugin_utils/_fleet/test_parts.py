"""plugin_utils/_fleet/parts.py: slice parts and their merge (pure)."""

import json

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.module_utils._status import MISSING, TASK_FAILED
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import parts
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector, build_report
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import schema_validator


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
    collector = FleetCollector()
    collector.add_task_failed("h1", "boom")
    collector.add_doctor("h2", {"checks": [{"id": "gpu.ecc_errors", "status": "PASS"}]})
    summary = parts.part_summary({"ok": False}, collector.hosts, "77", "3")
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


def _checks(*pairs):
    return [{"id": check_id, "status": status} for check_id, status in pairs]


def test_host_checks_worst_first_at_most_eight_and_the_rest_counted():
    checks = _checks(("gpu.w1", "WARN"), ("gpu.p", "PASS"), ("gpu.f2", "FAIL"), ("gpu.e1", "ERROR"), ("gpu.s", "SKIP"),
                     ("gpu.f1", "FAIL"), ("gpu.w2", "WARN"), ("gpu.w3", "WARN"), ("gpu.w4", "WARN"), ("gpu.w5", "WARN"),
                     ("gpu.w6", "WARN"), ("gpu.w7", "WARN"))
    assert parts.host_checks(checks) == {"FAIL": ["gpu.f1", "gpu.f2"], "ERROR": ["gpu.e1"],
                                         "WARN": ["gpu.w1", "gpu.w2", "gpu.w3", "gpu.w4", "gpu.w5"], "more": 2}
    assert parts.host_checks(_checks(("gpu.p", "PASS"), ("gpu.s", "SKIP"))) is None
    # A check blocked by a failed root is SKIP: the root is the host's failing check, once.
    blocked = [{"id": "driver.nvidia_smi", "status": "ERROR"}, {"id": "gpu.ecc_errors", "status": "SKIP", "blocked_by": "driver.nvidia_smi"}]
    assert parts.host_checks(blocked) == {"ERROR": ["driver.nvidia_smi"], "more": 0}


def test_host_checks_of_the_catalogues_longest_ids_stay_within_the_documented_bytes():
    """docs/awx.md: at most 75 + 8 x (the longest check id) bytes of JSON per host besides its name, 283 today."""
    longest = sorted((chk.id for chk in CATALOGUE), key=lambda check_id: (-len(check_id), check_id))
    # The longest ids spread over the three statuses (each key costs bytes), the rest counted in "more".
    worst = _checks(*[(check_id, ("FAIL", "ERROR", "WARN")[n % 3]) for n, check_id in enumerate(longest)])
    carried = parts.host_checks(worst)
    assert sum(len(ids) for key, ids in carried.items() if key != "more") == parts.HOST_CHECKS_MAX
    assert carried["more"] == len(CATALOGUE) - parts.HOST_CHECKS_MAX
    longest_id = len(longest[0])
    assert len(json.dumps(carried)) <= 75 + parts.HOST_CHECKS_MAX * longest_id <= 283
    one = parts.host_checks(_checks(("gpu.ecc_errors", "FAIL")))
    assert len(json.dumps(one)) == 39


def _artifact(job, statuses, host_checks):
    data = {"job_id": job, "workflow_job_id": "77", "host_statuses": statuses}
    if host_checks is not None:
        data["host_checks"] = host_checks
    return {parts.stats_key(job): data}


def test_merge_from_artifacts_alone_lists_each_hosts_checks_in_the_report():
    collector = FleetCollector()
    collector.add_doctor("n1", {"checks": _checks(("gpu.ecc_errors", "FAIL"), ("gpu.persistence_mode", "WARN"),
                                                  ("driver.version", "PASS"))})
    collector.add_doctor("n2", {"checks": _checks(*[("gpu.w%d" % n, "WARN") for n in range(10)])})
    collector.add_doctor("n3", {"checks": _checks(("gpu.ecc_errors", "PASS"))})
    artifacts = parts.part_summary({"ok": False}, collector.hosts, "77", "5")
    artifacts.update(_artifact("6", {"n4": "error"}, {"n4": {"ERROR": ["driver.nvidia_smi"], "more": 0}}))
    json.loads(json.dumps(artifacts))  # what AWX stores and hands on: plain JSON
    problems = []
    merged = parts.merge([], artifacts, "77", ["n1", "n2", "n3", "n4"], problems)
    assert problems == []
    hosts = merged["hosts"]
    assert (hosts["n1"]["failing_checks"], hosts["n1"]["warning_checks"]) == (["gpu.ecc_errors"], ["gpu.persistence_mode"])
    assert hosts["n2"]["warning_checks"] == ["gpu.w%d" % n for n in range(8)]
    assert hosts["n2"]["message"].endswith("; 2 more failing or warning checks not carried")
    assert hosts["n3"]["failing_checks"] == [] and "artifact_checks" not in hosts["n3"]
    assert hosts["n4"]["failing_checks"] == ["driver.nvidia_smi"] and hosts["n4"]["doctor"] is None
    report = build_report(hosts, "2026-11-22T13:00:00+00:00", "merge.yml")
    assert [(e["host"], e["status"]) for e in report["failing"]["gpu.ecc_errors"]] == [("n1", "FAIL")]
    assert [(e["host"], e["status"]) for e in report["failing"]["driver.nvidia_smi"]] == [("n4", "ERROR")]
    assert [(a["check_id"], a["hosts"]) for a in report["actions"][:2]] == [("gpu.ecc_errors", ["n1"]), ("driver.nvidia_smi", ["n4"])]
    assert report["checks"]["gpu.ecc_errors"]["FAIL"] == 1
    errors = sorted(schema_validator().iter_errors(report), key=str)
    assert not errors, errors[0].message if errors else None


@pytest.mark.parametrize("host_checks, why", [
    ("n1", "host_checks is not a mapping of hosts"),
    ({"nx": {"FAIL": ["gpu.ecc_errors"], "more": 0}}, "host_checks names 'nx', which is not in its host_statuses"),
    ({"n1": {"FAIL": "gpu.ecc_errors", "more": 0}}, "host_checks of 'n1': FAIL, ERROR and WARN must be lists of dotted check ids"),
    ({"n1": {"FAIL": [7], "more": 0}}, "host_checks of 'n1': FAIL, ERROR and WARN must be lists of dotted check ids"),
    ({"n1": {"FAIL": ["<script>"], "more": 0}}, "host_checks of 'n1': FAIL, ERROR and WARN must be lists of dotted check ids"),
    ({"n1": {"PASS": ["gpu.ecc_errors"]}}, "host_checks of 'n1' is not {FAIL|ERROR|WARN: [check ids], more: count}"),
    ({"n1": {"FAIL": ["gpu.ecc_errors"], "more": -1}}, "host_checks of 'n1': more is -1, not a count"),
    ({"n1": {"FAIL": ["gpu.ecc_errors"], "more": True}}, "host_checks of 'n1': more is True, not a count"),
    ({"n1": {"WARN": ["gpu.persistence_mode"], "more": 0}}, "host_checks of 'n1' make it warning, but its host_statuses say failed"),
    ({"n1": {"more": 0}}, "host_checks of 'n1' make it healthy, but its host_statuses say failed"),
])
def test_bad_host_checks_are_one_problem_line_and_the_statuses_still_count(host_checks, why):
    problems = []
    merged = parts.merge([], _artifact("5", {"n1": "failed"}, host_checks), "77", ["n1"], problems)
    assert problems == ["parts: hydra_fleet_part_5: its check ids are ignored, its host statuses used: %s" % why]
    assert merged["hosts"]["n1"]["status"] == "failed" and merged["hosts"]["n1"]["failing_checks"] == []


def test_an_artifact_without_host_checks_gives_statuses_only():
    merged = parts.merge([], _artifact("5", {"n1": "failed"}, None), "77", ["n1"], [])
    assert merged["hosts"]["n1"]["failing_checks"] == [] and "artifact_checks" not in merged["hosts"]["n1"]
    assert "no check details" in merged["hosts"]["n1"]["message"]


def test_part_files_are_read_one_at_a_time_in_name_order_and_an_unreadable_one_is_empty_text(tmp_path):
    directory = tmp_path / parts.PARTS_DIR / "77"
    directory.mkdir(parents=True)
    (directory / "job-1.json").write_text(_part("77", "1", {"h1": TASK_FAILED}))
    (directory / "job-2.json").write_text("as first written")
    (directory / "job-3.json").write_bytes(b"\xff\xfe not utf-8")
    (directory / "notes.txt").write_text("not a part")
    files = parts.read_part_files(str(tmp_path), "77")
    first = next(files)
    assert first[0].endswith("job-1.json") and parts.parse_part(first[1])["job_id"] == "1"
    # The second part is read only when the merge comes to it, not with the first: one part's text in memory at a time.
    (directory / "job-2.json").write_text("rewritten before its turn")
    assert [text for _path, text in files] == ["rewritten before its turn", ""]
    assert list(parts.read_part_files(str(tmp_path), "no-such-workflow")) == []


def test_the_merged_hosts_go_to_the_callback_as_written_and_a_bad_file_is_one_error():
    problems = []
    merged = parts.merge([("a", _part("77", "1", {"h1": TASK_FAILED, "h2": "unreachable"}))], {}, "77", ["h1", "h2", "h3"], problems)
    lines = list(parts.merged_text(merged))
    assert [json.loads(line)[0] for line in lines[1:]] == list(merged["hosts"])  # one host a line, in name order
    back = parts.parse_merged(lines)
    assert back == {"hosts": merged["hosts"], "groups": {}}
    assert parts.merged_path("/srv/reports", "77") == "/srv/reports/parts/77/merged.jsonl"
    assert not parts._PART_FILE.match(parts.MERGED_FILE)  # never taken for a slice's part
    for bad, why in ((lines[:-1], "2 hosts where its first line says 3: the file ends early"),
                     (lines + lines[-1:], "host 'h3' is on two lines"),
                     (lines[:1] + lines[1:] + ['["h4", {"status": "healthy"}]\n'], "4 hosts where its first line says 3$"),
                     (lines[:-1] + [lines[-1][:-10]], "line 4 is not JSON"),
                     ([_part("77", "1", {"h1": TASK_FAILED})], "not the merged hosts"),
                     ([], "line 1 is not JSON"),
                     (lines[:1] + ['{"h1": {}}\n'], "line 2 is not \\[host, entry\\]"),
                     ([line.replace('"task_failed"', '"fine"') for line in lines], "host 'h1' has no valid status")):
        with pytest.raises(parts.PartError, match=why):
            parts.parse_merged(bad)

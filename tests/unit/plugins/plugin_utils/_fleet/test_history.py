"""Fleet history over several runs: EWMA, degradation trends and repeat offenders, and the snapshot files."""

import datetime
import json
import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._results import gpu_ref
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import history
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse
from ansible_collections.continuum.hydra.tests.support.fleet_factory import SyntheticFleet, check


def _run(fleet, earlier, when):
    options = AnalysisOptions(history=list(earlier))
    report = analyse(fleet.report(generated_at=when), options)
    return report["analysis"]["history"], options.current_snapshot


def _fail_gpu_check(fleet, host, index, check_id="gpu.ecc_errors"):
    gpu = fleet.hosts[host]["doctor"]["environment"]["gpus"][index]
    checks = fleet.hosts[host]["doctor"]["checks"]
    checks[:] = [c for c in checks if c["id"] != check_id] + [check(check_id, "FAIL", gpus=[gpu_ref(gpu)])]
    return gpu["uuid"]


def _pass_check(fleet, host, check_id="gpu.ecc_errors"):
    checks = fleet.hosts[host]["doctor"]["checks"]
    checks[:] = [c for c in checks if c["id"] != check_id] + [check(check_id, "PASS")]


def test_trends_ewma_and_repeat_offenders_over_four_runs():
    fleet = SyntheticFleet({"a100x8": 12}, seed=5, cv=0.01)
    hosts = fleet.names("a100x8")
    declining, flaky, flaky_once, lost_gpu, slow_gpu_host = hosts[1], hosts[2], hosts[3], hosts[4], hosts[5]
    triad = fleet.hosts[declining]["profile"]["figures"]["triad_gbps"]
    gpu_tflops = fleet.hosts[hosts[6]]["profile"]["gpus"][3]["figures"]
    gpu_tflops_uuid = fleet.hosts[hosts[6]]["profile"]["gpus"][3]["uuid"]
    snapshots, results = [], []
    for run in range(4):
        fleet.hosts[declining]["profile"]["figures"]["triad_gbps"] = triad * (1.0 - 0.04 * run)
        gpu_tflops["bf16_tflops"] = 280.0 * (1.0 - 0.03 * run)
        if run in (1, 3):
            flaky_uuid = _fail_gpu_check(fleet, flaky, 6)
        else:
            _pass_check(fleet, flaky)
        if run == 2:
            _fail_gpu_check(fleet, flaky_once, 0)
        else:
            _pass_check(fleet, flaky_once)
        count_check = [c for c in fleet.hosts[lost_gpu]["doctor"]["checks"] if c["id"] == "gpu.count"]
        if run in (0, 2) and not count_check:
            fleet.hosts[lost_gpu]["doctor"]["checks"].append(check("gpu.count", "FAIL"))
        elif run not in (0, 2) and count_check:
            fleet.hosts[lost_gpu]["doctor"]["checks"].remove(count_check[0])
        if run == 2:
            slow_uuid = fleet.slow_gpu(slow_gpu_host, 1, 0.7)
        if run == 3:
            fleet.slow_gpu(slow_gpu_host, 1, 0.7)  # again 0.7 of the class: 0.49 of its first value
        result, snap = _run(fleet, snapshots, "2026-11-2%dT13:00:00+00:00" % run)
        snapshots.append(snap)
        results.append(result)
    last = results[-1]
    assert last["runs"] == 4
    series = last["hosts"][declining]
    values = [triad * (1.0 - 0.04 * run) for run in range(4)]
    assert series["runs"] == 4
    assert series["ewma"]["triad_gbps"] == pytest.approx(((values[0] * 0.7 + values[1] * 0.3) * 0.7 + values[2] * 0.3) * 0.7 + values[3] * 0.3)
    # 100, 96, 92, 88 % of the first run: the fitted line loses 12 % of the mean (94 %) over the window
    assert series["trend"]["triad_gbps"] == pytest.approx(-0.12 / 0.94, rel=1e-6)
    assert last["gpus"][gpu_tflops_uuid]["host"] == hosts[6] and last["gpus"][gpu_tflops_uuid]["index"] == 3
    degrading = [(d["host"], d["uuid"], d["metric"]) for d in last["degrading"]]
    gpu_uuid = fleet.hosts[hosts[6]]["profile"]["gpus"][3]["uuid"]
    assert degrading == [(slow_gpu_host, slow_uuid, "bf16_tflops"), (declining, None, "triad_gbps"), (hosts[6], gpu_uuid, "bf16_tflops")]
    offenders = [(o["kind"], o["host"], o["uuid"], o["runs_failed"], o["offences"], o["failing_now"]) for o in last["repeat_offenders"]]
    assert offenders == [
        ("gpu", flaky, flaky_uuid, 2, ["gpu.ecc_errors"], True),
        ("host", lost_gpu, None, 2, ["gpu.count"], False),
        ("gpu", slow_gpu_host, slow_uuid, 2, ["straggler:bf16_tflops"], True),
    ]
    # after three runs only one ECC failure of the flaky GPU is in the window: not yet a repeat offender
    assert [o["host"] for o in results[2]["repeat_offenders"]] == [lost_gpu]
    assert results[0]["degrading"] == [] and results[0]["repeat_offenders"] == []


def test_a_gpu_is_followed_by_uuid_when_it_moves_host():
    fleet = SyntheticFleet({"a10gx4": 6}, cv=0.0)
    first, second = fleet.names("a10gx4")[:2]
    uuid = _fail_gpu_check(fleet, first, 2)
    result, snap = _run(fleet, [], "2026-11-20T00:00:00+00:00")
    _pass_check(fleet, first)
    moved = fleet.hosts[second]["doctor"]["environment"]["gpus"][0]
    moved["uuid"] = uuid
    fleet.hosts[second]["profile"]["gpus"][0]["uuid"] = uuid
    _fail_gpu_check(fleet, second, 0)
    result, dummy = _run(fleet, [snap], "2026-11-21T00:00:00+00:00")
    assert [(o["host"], o["uuid"], o["index"], o["runs_failed"]) for o in result["repeat_offenders"]] == [(second, uuid, 0, 2)]


def test_snapshot_files_are_kept_to_n_and_a_broken_one_is_skipped(tmp_path):
    fleet = SyntheticFleet({"t4x1": 5})
    directory = str(tmp_path / "history")
    start = datetime.datetime(2026, 11, 22, 13, 0, 0, tzinfo=datetime.timezone.utc)
    for run in range(5):
        dummy, snap = _run(fleet, [], "t")
        history.write_snapshot(directory, snap, start + datetime.timedelta(microseconds=run * 10), keep=3)
    names = sorted(os.listdir(directory))
    assert names == ["fleet-history-20261122T130000.0000%dZ.json" % n for n in (20, 30, 40)]
    with open(os.path.join(directory, names[1]), "w") as handle:
        handle.write("{not json")
    with open(os.path.join(directory, "notes.txt"), "w") as handle:
        handle.write("ignored: not a snapshot name")
    problems = []
    read = list(history.read_snapshots(directory, 10, problems))
    assert len(read) == 2 and all(s["kind"] == history.SNAPSHOT_KIND for s in read)
    assert len(problems) == 1 and problems[0].startswith("history: skipped %s: " % os.path.join(directory, names[1]))
    assert list(history.read_snapshots(directory, 1, [])) == [read[-1]]
    assert list(history.read_snapshots(str(tmp_path / "missing"), 5, problems)) == []
    with open(os.path.join(directory, names[2])) as handle:
        assert set(json.load(handle)["hosts"]) == set(fleet.hosts)

"""Workloads across the fleet: the analysis (spread, stragglers, failures per class) and the batch plan's workload throughput."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._status import RUN_STATUSES
from ansible_collections.continuum.hydra.plugins.module_utils._workload import run as workload_run
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import workloads
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector


def row(name, status, performance=None, metric="samples_per_second", args="", **fields):
    """A row as the module returns it (the module's own row builder, so a shape change breaks here)."""
    # pylint: disable-next=protected-access
    return workload_run._row(name, args, status, performance=performance, metric=metric if performance is not None else None,
                             **fields)


def result(rows, gpus=0, vendor=None, tags=("fleet",)):
    return {"changed": False, "mode": "run", "tags": list(tags), "catalogue": "/opt/MAD", "available": None,
            "workloads": rows, "summary": dict((s, sum(r["status"] == s for r in rows)) for s in RUN_STATUSES),
            "sampler": {}, "gpus": gpus, "gpu_vendor": vendor, "run_log": None}


def fleet(per_host, classes=None):
    """Host entries through the collector: per_host {host: module result}; classes {host: class} sets ``class``."""
    collector = FleetCollector()
    for host, res in per_host.items():
        collector.add_workload(host, workloads.host_entry(res))
    report = collector.build("2026-11-24T13:00:00+00:00", "workloads.yml")
    for host, klass in (classes or {}).items():
        report["hosts"][host]["class"] = klass
    return report["hosts"]


def train(value, **kw):
    return result([row("train", "SUCCESS", value, duration_s=1.5)], **kw)


def test_a_planted_straggler_is_found_in_its_class_and_not_in_the_other():
    speeds = {"a1": "1000", "a2": "1010", "a3": "990", "a4": "1005", "a5": "700",  # a5: 30 % slow
              "b1": "400", "b2": "410", "b3": "395"}                                 # b: slower GPUs, a class of their own
    hosts = fleet(dict((h, train(v)) for h, v in speeds.items()),
                  dict((h, "8x H100" if h.startswith("a") else "8x A100") for h in speeds))
    section = workloads.analyse_workloads(hosts)
    tables = dict((t["class"], t) for t in section["workloads"]["train"]["tables"])
    assert set(tables) == {"8x H100", "8x A100"}
    h100, a100 = tables["8x H100"], tables["8x A100"]
    assert (h100["n"], h100["median"], h100["min"], h100["max"]) == (5, 1000.0, 700.0, 1010.0)
    assert [s["host"] for s in h100["stragglers"]] == ["a5"] and h100["stragglers"][0]["ratio"] == pytest.approx(0.7)
    assert h100["stragglers"][0]["robust_z"] < -3.5
    assert a100["judged"] and a100["stragglers"] == [] and a100["median"] == 400.0
    slow = [r["host"] for r in section["results"] if r["straggler"]]
    assert slow == ["a5"]


def test_failures_are_listed_with_reason_and_log_and_never_count_as_values():
    hosts = fleet({
        "n1": result([row("train", "SUCCESS", "100")]),
        "n2": result([row("train", "FAILURE", reason="the script exited with status 1",
                          log_tail=["step 1", "RuntimeError: CUDA error: an illegal memory access"], exit_code=1)]),
        "n3": result([row("train", "TIMEOUT", reason="killed at the 60s deadline")]),
        "n4": result([row("train", "SUCCESS", "0-15", metric="cpuset")]),  # madengine's run_cpu_bind.sh reports a cpuset
        "n5": result([row("train", "SKIPPED", reason="asks for 8 GPUs; this host has 0")]),
        "n6": result([row("train", "SUCCESS", "nan")]),
    })
    section = workloads.analyse_workloads(hosts)
    work = section["workloads"]["train"]
    failures = dict((f["host"], f) for f in work["failures"])
    assert sorted(failures) == ["n2", "n3", "n4", "n6"]
    assert failures["n2"]["status"] == "FAILURE" and failures["n2"]["log"][-1].startswith("RuntimeError: CUDA error")
    assert failures["n3"]["reason"] == "killed at the 60s deadline"
    assert failures["n4"]["reason"] == "unreadable performance: '0-15'" and failures["n6"]["reason"].startswith("unreadable")
    assert work["skipped"] == [{"host": "n5", "reason": "asks for 8 GPUs; this host has 0"}]
    [table] = work["tables"]
    assert table["hosts"] == ["n1"] and not table["judged"]
    assert section["counts"] == {"SUCCESS": 1, "FAILURE": 1, "SKIPPED": 1, "TIMEOUT": 1, "unreadable performance": 2}


def test_unclassified_hosts_split_by_gpu_count_and_vendor_and_metrics_never_mix():
    hosts = fleet({
        "cpu1": result([row("train", "SUCCESS", "10")]),
        "gpu1": result([row("train", "SUCCESS", "500")], gpus=8, vendor="AMD"),
        "gpu2": result([row("train", "SUCCESS", "2.5", metric="step_time_ms")], gpus=8, vendor="AMD"),
    })
    tables = workloads.analyse_workloads(hosts)["workloads"]["train"]["tables"]
    assert [(t["class"], t["basis"], t["metric"], t["hosts"]) for t in tables] == [
        ("8 AMD GPUs", "workload", "samples_per_second", ["gpu1"]), ("8 AMD GPUs", "workload", "step_time_ms", ["gpu2"]),
        ("no GPU", "workload", "samples_per_second", ["cpu1"])]


def test_same_name_with_other_args_is_another_workload_and_a_rerun_counts_once():
    hosts = fleet({"h%d" % i: result([row("bert", "SUCCESS", str(100 + i), args="--batch 32"),
                                      row("bert", "SUCCESS", str(200 + i), args="--batch 64"),
                                      row("bert", "SUCCESS", str(300 + i), args="--batch 64")]) for i in range(3)})
    section = workloads.analyse_workloads(hosts)
    assert sorted(section["workloads"]) == ["bert --batch 32", "bert --batch 64"]
    [table] = section["workloads"]["bert --batch 64"]["tables"]
    assert table["n"] == 3 and table["median"] == 251.0  # each host's median of its two runs
    assert [r["run"] for r in section["results"] if r["host"] == "h0"] == [1, 1, 2]


def test_no_workload_no_section_and_discover_results_are_not_kept():
    assert workloads.analyse_workloads({"h": {"status": "healthy", "class": None}}) is None
    assert workloads.host_entry({"mode": "discover", "workloads": [{"name": "x"}]}) is None
    assert workloads.host_entry({"failed": True, "msg": "No models found corresponding to the given tag: nope"}) is None


def test_a_second_workload_task_adds_its_rows():
    collector = FleetCollector()
    collector.add_workload("h", workloads.host_entry(result([row("a", "SUCCESS", "1")], tags=["x"])))
    collector.add_workload("h", workloads.host_entry(result([row("b", "SUCCESS", "2")], tags=["y"])))
    entry = collector.hosts["h"]["workload"]
    assert [r["name"] for r in entry["rows"]] == ["a", "b"] and entry["tags"] == ["x", "y"]


def _healthy(report):
    for entry in report["hosts"].values():
        entry["status"] = "healthy"
    return report


def test_batch_metric_naming_a_workload_plans_by_its_throughput():
    collector = FleetCollector()
    for host, value in (("fast", "300"), ("slow", "100")):
        collector.add_workload(host, workloads.host_entry(result([row("train_step", "SUCCESS", value)], gpus=2, vendor="NVIDIA")))
    collector.add_workload("broken", workloads.host_entry(result([row("train_step", "FAILURE", reason="exit 1")], gpus=2)))
    report = _healthy(collector.build("2026-11-24T13:00:00+00:00", "workloads.yml"))
    analyse(report, AnalysisOptions(batch={"global_batch_size": 400, "metric": "train_step"}))
    plan = report["analysis"]["batch_plan"]
    assert plan["error"] is None and plan["metric"] == "train_step" and plan["source"] == "workload"
    assert plan["hosts"]["fast"]["batch_size"] == 300 and plan["hosts"]["slow"]["batch_size"] == 100
    assert [g["throughput"] for g in plan["hosts"]["fast"]["gpus"]] == [150.0, 150.0]
    assert plan["excluded_hosts"] == {"broken": "no successful train_step run"}


def test_batch_metric_of_a_time_workload_is_inverted_and_an_unknown_name_stays_a_profile_figure():
    collector = FleetCollector()
    for host, value in (("quick", "50"), ("sluggish", "100")):
        collector.add_workload(host, workloads.host_entry(result([row("step", "SUCCESS", value, metric="step_time_ms")], gpus=1)))
    report = _healthy(collector.build("2026-11-24T13:00:00+00:00", "workloads.yml"))
    analyse(report, AnalysisOptions(batch={"global_batch_size": 30, "metric": "step"}))
    plan = report["analysis"]["batch_plan"]
    assert plan["hosts"]["quick"]["batch_size"] == 20 and plan["hosts"]["sluggish"]["batch_size"] == 10
    analyse(report, AnalysisOptions(batch={"global_batch_size": 30, "metric": "bf16_tflops"}))
    plan = report["analysis"]["batch_plan"]
    assert "source" not in plan and plan["error"].startswith("no GPU with a bf16_tflops figure")

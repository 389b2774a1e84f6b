"""The workload runner on real subprocesses: madengine's dummy models and tiny models in temporary catalogues."""

import json
import os
import time

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._workload import run
from ansible_collections.continuum.hydra.plugins.module_utils._workload.catalogue import Catalogue
from ansible_collections.continuum.hydra.tests.support.helpers import REPO, fixture_path, read_fixture

DUMMY = fixture_path("madengine-dummy")


def runner(root, tmp_path, **kwargs):
    devices = tmp_path / "no-pci"
    devices.mkdir(exist_ok=True)
    kwargs.setdefault("gpus", 1)
    return run.Runner(str(root), devices_dir=str(devices), sample_interval_s=0.2, gpu_telemetry=False, **kwargs)


def make(tmp_path, models, scripts):
    root = tmp_path / "cat"
    (root / "scripts" / "t").mkdir(parents=True)
    (root / "models.json").write_text(json.dumps([dict({"args": "", "n_gpus": "0", "tags": ["t"]}, **m) for m in models]))
    for name, text in scripts.items():
        (root / "scripts" / "t" / name).write_text(text)
    return root


def test_the_dummy_model_succeeds_with_its_metric_and_multiple_results_give_one_row_per_csv_row(tmp_path):
    result = runner(DUMMY, tmp_path).run_all(Catalogue(DUMMY).select(["dummy", "dummy_multi"]))
    rows = result["workloads"]
    assert [(r["name"], r["status"], r["metric"]) for r in rows] == [
        ("dummy", "SUCCESS", "samples_per_second")] + [("dummy_multi_%d" % i, "SUCCESS", "samples_per_sec") for i in range(1, 5)]
    assert rows[0]["performance"].isdigit() and rows[0]["exit_code"] == 0 and rows[0]["runtime"] == "host"
    assert any(line.startswith("performance: ") for line in rows[0]["log_tail"])
    assert all(r["performance"].isdigit() and "temperature" in r["extra"] for r in rows[1:])
    assert rows[0]["telemetry"]["cpu"]["samples"] >= 0 and "memory" in rows[0]["telemetry"]
    assert result["workspace_removed"] is True


def test_a_sleeping_model_with_timeout_5_fails_in_seconds_and_the_next_model_still_succeeds(tmp_path):
    start = time.monotonic()
    rows = runner(DUMMY, tmp_path, timeout=5).run_all(Catalogue(DUMMY).select(["dummy_sleep", "dummy"]))["workloads"]
    assert time.monotonic() - start < 60  # the model asks for sleep 300 and a 120 s timeout
    sleep, dummy = rows
    assert (sleep["status"], sleep["timeout_s"], sleep["exit_code"]) == ("TIMEOUT", 5, None)
    assert 4.5 <= sleep["duration_s"] < 30
    assert sleep["log_tail"][0] == "Setting timeout to 5 seconds."
    assert dummy["status"] == "SUCCESS"


def test_the_models_own_timeout_applies_by_default(tmp_path):
    root = make(tmp_path, [{"name": "slow", "scripts": "scripts/t/slow.sh", "timeout": 2}], {"slow": "", "slow.sh": "sleep 60\n"})
    (row,) = runner(root, tmp_path).run_all(Catalogue(str(root)).select(["slow"]))["workloads"]
    assert row["status"] == "TIMEOUT" and row["timeout_s"] == 2 and row["duration_s"] < 20


def test_missing_script_garbage_crash_and_gpu_count_are_each_their_own_row(tmp_path):
    garbage = "printf '\\033[31mred\\033[0m\\x01\\x02 \\xff\\xfe bytes\\rprogress 100%%\\n'\necho 'performance: fast'\n"
    crash = "import sys\nprint('performance: 12 samples_per_second')\nsys.stdout.flush()\nraise RuntimeError('boom')\n"
    root = make(tmp_path, [
        {"name": "missing", "scripts": "scripts/t/nope.sh"},
        {"name": "garbage", "scripts": "scripts/t/garbage.sh"},
        {"name": "crash", "scripts": "scripts/t/crash.py"},
        {"name": "errors", "scripts": "scripts/t/errors.sh"},
        {"name": "big", "scripts": "scripts/t/ok.sh", "n_gpus": "8"},
        {"name": "ok", "scripts": "scripts/t/ok.sh", "args": "--n 3"},
    ], {"garbage.sh": garbage, "crash.py": crash, "errors.sh": "echo 'RuntimeError: lost rank'\necho 'performance: 5 x'\n",
        "ok.sh": "echo \"args=$*\"\necho \"performance: 1.5e3 tokens/s\"\n"})
    rows = runner(root, tmp_path).run_all(Catalogue(str(root)).select(["t"]))["workloads"]
    by_name = {r["name"]: r for r in rows}
    assert [r["name"] for r in rows] == ["missing", "garbage", "crash", "errors", "big", "ok"]
    assert by_name["missing"]["status"] == "FAILURE" and "scripts/t/nope.sh not found" in by_name["missing"]["reason"]
    assert by_name["garbage"]["status"] == "FAILURE" and "no 'performance" in by_name["garbage"]["reason"]
    assert "red \ufffd\ufffd bytes" not in by_name["garbage"]["log_tail"][1]
    assert by_name["garbage"]["log_tail"][1] == "progress 100%"  # escapes and control characters gone, last CR state kept
    assert (by_name["crash"]["status"], by_name["crash"]["exit_code"]) == ("FAILURE", 1)
    assert by_name["crash"]["log_tail"][-1] == "RuntimeError: boom"
    assert by_name["errors"]["status"] == "FAILURE" and by_name["errors"]["reason"].startswith("error pattern in the log: RuntimeError:")
    assert by_name["big"]["status"] == "SKIPPED" and by_name["big"]["reason"] == "asks for 8 GPUs; this host has 1"
    assert (by_name["ok"]["status"], by_name["ok"]["performance"], by_name["ok"]["metric"]) == ("SUCCESS", "1.5e3", "tokens/s")
    assert "args=--n 3" in by_name["ok"]["log_tail"]


def test_a_background_child_does_not_outlive_its_model(tmp_path):
    marker = tmp_path / "alive"
    script = "(sleep 3; touch %s) &\necho 'performance: 1 x'\n" % marker
    root = make(tmp_path, [{"name": "bg", "scripts": "scripts/t/bg.sh"}], {"bg.sh": script})
    (row,) = runner(root, tmp_path).run_all(Catalogue(str(root)).select(["bg"]))["workloads"]
    assert row["status"] == "SUCCESS"
    time.sleep(4)
    assert not marker.exists()


def test_a_training_script_reports_phases_through_the_helper(tmp_path):
    script = ("import time\nimport hydra_phases as phases\n"
              "for i in range(5):\n    with phases.step():\n"
              "        with phases.phase('forward'):\n            time.sleep(0.01)\n"
              "        with phases.phase('backward'):\n            time.sleep(0.03)\n"
              "print('performance: 5 steps')\n")
    root = make(tmp_path, [{"name": "train", "scripts": "scripts/t/train.py"}], {"train.py": script})
    (row,) = runner(root, tmp_path).run_all(Catalogue(str(root)).select(["train"]))["workloads"]
    assert row["status"] == "SUCCESS", row
    summary = row["phases"]
    assert summary["steps"] == 5 and set(summary["phases"]) == {"forward", "backward"}
    assert summary["dominant"] == "backward" and 0.5 < summary["phases"]["backward"]["share"] < 1


def test_the_run_log_records_each_model(tmp_path):
    log_path = tmp_path / "run.jsonl"
    log = run.RunLog(str(log_path))
    runner(DUMMY, tmp_path, run_log=log).run_all(Catalogue(DUMMY).select(["dummy"]))
    log.close()
    events = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert [e["event"] for e in events] == ["run_start", "workload_start", "workload_end", "run_end"]
    assert events[2]["status"] == "SUCCESS" and events[3]["statuses"]["SUCCESS"] == 1


@pytest.mark.parametrize("line, expected", [
    ("performance: 14164 samples_per_second", ("14164", "samples_per_second")),
    ("x performance: 1.5e3 tokens/s\nperformance: 2 y", ("1.5e3", "tokens/s")),  # the first wins
    ("performance: 123/s, tokens", ("123", "tokens")),
    ("performance: 7, ms", ("7", "ms")),
    ("performance:  context", None), ("performance:5 x", None), ("Performance: 5 x", None),
    ("{'train_samples_per_second': 4.23}", ("4.23", "samples_per_second")),
])
def test_performance_lines_follow_madengines_pattern(line, expected):
    assert run.parse_performance(line) == expected


def test_multiple_results_csv_rules():
    rows, problem = run.parse_multiple_results(" model , performance, metric\n1, 5, x\n2,,x\n")
    assert problem is None and rows[1]["performance"] == "" and rows[0]["model"] == "1"
    assert run.parse_multiple_results("model,metric\n1,x\n") == (None, "the CSV has no performance column")
    assert run.parse_multiple_results("model,performance,metric\n1,,x\n") == (None, "no row of the CSV has a performance value")
    assert run.parse_multiple_results("") == (None, "the CSV is empty")


def test_script_commands_are_madengines():
    assert run.script_command("scripts/dummy/run.sh", " --x 1", "py") == ("scripts/dummy", ["bash", "run.sh", "--x", "1"])
    assert run.script_command("scripts/a/train.py", "", "py") == ("scripts/a", ["py", "train.py"])
    assert run.script_command("scripts/a", "", "py") == ("scripts/a", ["bash", "run.sh"])


def test_container_argv_passes_gpus_per_vendor_and_engine():
    argv = run.container_run_argv("docker", "img", "/w", ["bash", "run.sh"], {"B": "2", "A": "1"}, "AMD", "n")
    assert argv[:3] == ["docker", "run", "--rm"]
    assert argv[argv.index("--device"):argv.index("--device") + 4] == ["--device", "/dev/kfd", "--device", "/dev/dri"]
    assert argv[-7:] == ["-e", "A=1", "-e", "B=2", "img", "bash", "run.sh"]
    assert "-v" in argv and argv[argv.index("-v") + 1] == "/w:/myworkspace"
    nvidia = run.container_run_argv("docker", "img", "/w", ["bash"], {}, "NVIDIA", "n")
    assert nvidia[nvidia.index("--gpus") + 1] == "all" and "/dev/kfd" not in nvidia
    assert "nvidia.com/gpu=all" in run.container_run_argv("podman", "img", "/w", ["bash"], {}, "NVIDIA", "n")
    assert run.gpu_flags("docker", None) == []
    expected = ["podman", "build", "--network", "host", "-f", "d/x.Dockerfile", "-t", "t", "d"]
    assert run.build_argv("podman", "d/x.Dockerfile", "t", "d") == expected


def test_auto_runtime_needs_a_dockerfile_and_an_engine_that_answers():
    assert run.pick_runtime("auto", True, lambda engine: engine == "podman") == "podman"
    assert run.pick_runtime("auto", True, lambda engine: False) == "host"
    assert run.pick_runtime("auto", False, lambda engine: True) == "host"
    assert run.pick_runtime("docker", False, lambda engine: False) == "docker"


def test_auto_picks_host_when_no_engine_answers_here(tmp_path):
    # no docker or podman daemon on the CI machine: engine_answers is really asked and says no
    rows = runner(DUMMY, tmp_path, runtime="auto", engine_ok=lambda e: run.engine_answers(e, timeout=5)).run_all(
        Catalogue(DUMMY).select(["dummy"]))["workloads"]
    assert (rows[0]["runtime"], rows[0]["status"]) == ("host", "SUCCESS")


def test_dockerfiles_are_filtered_by_their_context_line():
    docker = os.path.join(DUMMY, "docker")
    candidates = {name: read_fixture("madengine-dummy", "docker", name) for name in os.listdir(docker) if name.startswith("dummy.")}
    assert run.dockerfile_context(candidates["dummy.ubuntu.amd.Dockerfile"]) == {"gpu_vendor": "AMD", "guest_os": "UBUNTU"}
    assert run.matching_dockerfiles(candidates, {"gpu_vendor": "NVIDIA"}) == ["dummy.ubuntu.nvidia.Dockerfile"]
    assert run.matching_dockerfiles(candidates, {}) == sorted(candidates)


BUILTIN = os.path.join(REPO, "workloads")


def test_the_built_in_catalogue_tags_smoke_gpu_and_multi_gpu():
    models = Catalogue(BUILTIN)
    assert [m["name"] for m in models.select(["smoke"])] == ["train_step", "h2d_copy", "allreduce"]
    assert [m["name"] for m in models.select(["gpu"])] == ["train_step_gpu", "h2d_copy_gpu"]
    assert [m["name"] for m in models.select(["multi_gpu"])] == ["allreduce_multi_gpu"]


def test_gpu_workloads_are_skipped_on_a_host_without_gpus(tmp_path):
    rows = runner(BUILTIN, tmp_path, gpus=0).run_all(Catalogue(BUILTIN).select(["gpu,multi_gpu"]))["workloads"]
    assert [(r["status"], r["reason"]) for r in rows] == [
        ("SKIPPED", "asks for 1 GPUs; this host has 0"), ("SKIPPED", "asks for 1 GPUs; this host has 0"),
        ("SKIPPED", "asks for 2 GPUs; this host has 0")]


def test_execute_discovers_from_files_and_refuses_bad_input_in_one_line(tmp_path):
    files = {"models.json": json.dumps([{"name": "m", "scripts": "scripts/m/run.sh", "args": "", "tags": ["x"], "timeout": 9}]),
             "scripts/m/run.sh": "echo 'performance: 1 x'\n"}
    result = run.execute("discover", ["x:k=v"], catalogue_files=files)
    assert result["workloads"] == [{"name": "m", "args": " --k v", "scripts": "scripts/m/run.sh", "dockerfile": "", "n_gpus": "-1",
                                    "timeout": 9, "tags": ["x"], "multiple_results": ""}]
    assert run.execute("discover", [], catalogue_files=files)["available"] == ["m"]
    checked = run.execute("run", ["m"], catalogue_files=files, check_mode=True)
    assert checked["workloads"][0]["timeout"] == 9 and "summary" not in checked
    for kwargs, message in (
            ({"timeout": -2}, "timeout -2 is not accepted"),
            ({"catalogue_files": {"../x": ""}}, "catalogue_files: '../x' is not a relative path"),
            ({"catalogue": str(tmp_path / "none")}, "is not a directory"),
            ({"extra_env": {"A=B": "1"}}, "extra_env: 'A=B' is not an environment variable name")):
        args = dict({"catalogue_files": files}, **kwargs)
        if "catalogue" in kwargs:
            del args["catalogue_files"]
        with pytest.raises(run.WorkloadError, match=message):
            run.execute("run", ["m"], **args)
    with pytest.raises(run.WorkloadError, match="mode run needs tags"):
        run.execute("run", [], catalogue_files=files)


def test_a_performance_that_is_no_measurement_fails_its_row_and_a_broken_csv_fails_its_model(tmp_path):
    csv_rows = "model,performance,metric\na,12.5,x\nb,garbage,x\nc,nan,x\nd,-1,x\ne,,x\n"
    root = make(tmp_path, [
        {"name": "negative", "scripts": "scripts/t/negative.sh"},
        {"name": "inf", "scripts": "scripts/t/inf.sh"},
        {"name": "rows", "scripts": "scripts/t/rows.sh", "multiple_results": "rows.csv"},
        {"name": "huge", "scripts": "scripts/t/huge.sh", "multiple_results": "huge.csv"},
        {"name": "ok", "scripts": "scripts/t/ok.sh"},
    ], {"negative.sh": "echo 'performance: -5 samples_per_second'\n",
        "inf.sh": "echo 'train_samples_per_second = inf'\necho 'performance: 1e999 x'\n",
        "rows.sh": "printf '%s' '" + csv_rows + "' > rows.csv\n",
        # A field longer than the csv module's limit (131072 characters): csv.Error, not a traceback.
        "huge.sh": "python3 -c \"print('model,performance,metric'); print('a,' + '1' * 200000 + ',x')\" > huge.csv\n",
        "ok.sh": "echo 'performance: 7 x'\n"})
    rows = runner(root, tmp_path).run_all(Catalogue(str(root)).select(["t"]))["workloads"]
    by_name = {r["name"]: r for r in rows}
    assert by_name["negative"]["status"] == "FAILURE" and "not a finite number >= 0" in by_name["negative"]["reason"]
    assert by_name["inf"]["status"] == "FAILURE" and "not a finite number >= 0" in by_name["inf"]["reason"]
    assert [(by_name["rows_" + n]["status"]) for n in "abcde"] == ["SUCCESS", "FAILURE", "FAILURE", "FAILURE", "FAILURE"]
    assert "is not a number" in by_name["rows_b"]["reason"] and by_name["rows_e"]["reason"] == "empty performance"
    assert by_name["huge"]["status"] == "FAILURE" and "cannot be read" in by_name["huge"]["reason"]
    assert by_name["ok"]["status"] == "SUCCESS"


def test_the_huggingface_fallback_reads_only_a_whole_number():
    assert run.parse_performance("'train_samples_per_second': 31.5,") == ("31.5", "samples_per_second")
    assert run.parse_performance("train_samples_per_second = 1.2.3e") == ("1.2", "samples_per_second")
    assert run.performance_problem("1.2") is None and run.performance_problem("1e999") is not None


def test_gpu_workloads_fail_when_the_gpus_could_not_be_counted_and_cpu_ones_still_run(tmp_path):
    models = [{"name": "cpu", "scripts": "scripts/t/cpu.sh"}, {"name": "gpu", "scripts": "scripts/t/cpu.sh", "n_gpus": "1"},
              {"name": "all", "scripts": "scripts/t/cpu.sh", "n_gpus": "-1"}]
    root = make(tmp_path, models, {"cpu": "", "cpu.sh": "echo 'performance: 1 samples_per_second'\n"})
    counter = runner(root, tmp_path)
    counter.gpus = None  # what count_gpus gives when the PCI bus did not answer in time (test_pci)
    rows = dict((r["name"], r) for r in counter.run_all(Catalogue(str(root)).select(["t"]))["workloads"])
    assert rows["cpu"]["status"] == "SUCCESS"
    for name in ("gpu", "all"):
        assert rows[name]["status"] == "FAILURE" and "could not be counted" in rows[name]["reason"]

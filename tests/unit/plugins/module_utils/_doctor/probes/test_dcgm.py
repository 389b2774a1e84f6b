"""dcgmi diag -j: every recorded output (DCGM 3.1, 4.2.3, 4.5.2) read into rows, other generations planted by editing
copies of them, malformed output named, and the probe running a fake dcgmi that replays a recording."""

import copy
import json
import os
import stat

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import dcgm
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path, read_fixture

GB10_R1 = ("glimmer-burnin", "gb10-dcgm423-r1-persistence-off.json")
GB10_R2_SKIP_423 = ("glimmer-burnin", "gb10-dcgm423-r2-memory-pcie-skip.json")
GB10_R2_SKIP_452 = ("glimmer-burnin", "gb10-dcgm452-r2-memory-pcie-skip.json")
GB10_R2_ALLOWED = ("glimmer-burnin", "gb10-dcgm452-r2-plugins-allowed.json")
T4_R2 = ("virtualclient", "t4-dcgm31-r2-healthy.json")
T4_R3 = ("virtualclient", "t4-dcgm31-r3-healthy-edited-line.json")
T4_ROOT_LIST = ("virtualclient", "t4-dcgm31-r2-root-not-an-object.json")
RECORDED = [GB10_R1, GB10_R2_SKIP_423, GB10_R2_SKIP_452, GB10_R2_ALLOWED, T4_R2, T4_R3]


def text(recording):
    return read_fixture("dcgm-diag", *recording)


def doc(recording):
    return json.loads(text(recording))


def rows_of(data):
    return [(r["test"], r["gpu"], r["result"]) for r in data["rows"]]


# ---------------------------------------------------------------- every recording


@pytest.mark.parametrize("recording", RECORDED, ids=lambda r: r[1])
def test_every_recording_reads_with_one_row_per_test_and_gpu(recording):
    data = dcgm.read_diag(text(recording), 0)
    raw = doc(recording)
    root = raw.get("DCGM GPU Diagnostic") or raw.get("DCGM Diagnostic")
    expected = sum(len(t["results"]) for c in root["test_categories"] for t in c["tests"])
    assert len(data["rows"]) == expected
    assert all(r["result"] in ("pass", "fail", "skip") for r in data["rows"])
    assert data["exit_code"] == 0 and data["exit_meaning"] == "no test failed"


def test_dcgm_4x_gb10_rows_name_the_gpu_and_keep_severity_and_summary():
    data = dcgm.read_diag(text(GB10_R2_ALLOWED), 226)
    assert data["format"] == "4.x" and data["version"] == "4.5.2" and data["driver_version"] == "580.82.09"
    assert rows_of(data) == [("software", 0, "fail"), ("memory", 0, "pass"), ("pcie", 0, "pass")]
    software = data["rows"][0]
    assert software["category"] == "Deployment" and software["entity_group"] == "GPU"
    assert software["warnings"][0]["error_id"] == 29 and software["warnings"][0]["error_severity"] == 5
    assert software["warnings"][0]["message"].startswith("Persistence Mode: Persistence mode for GPU 0 is disabled")
    assert [t["summary"] for t in data["tests"]] == ["fail", "pass", "pass"]
    assert data["entities"] == [{"entity_group": "GPU", "entity_id": 0, "device_id": "2e12", "serial": None}]
    assert data["exit_code"] == 226 and data["exit_meaning"] == "a test failed"


@pytest.mark.parametrize("recording", [GB10_R2_SKIP_423, GB10_R2_SKIP_452], ids=lambda r: r[1])
def test_dcgm_4x_sku_allowlist_skips_are_rows_not_passes(recording):
    data = dcgm.read_diag(text(recording), 226)
    assert rows_of(data) == [("software", 0, "fail"), ("memory", 0, "skip"), ("pcie", 0, "skip")]


def test_dcgm_31_t4_deployment_rows_are_host_wide_and_gpu_ids_name_the_gpu():
    data = dcgm.read_diag(text(T4_R3), 0)
    assert data["format"] == "2.x-3.2" and data["version"] is None
    host_wide = [r for r in data["rows"] if r["gpu"] is None]
    assert [r["test"] for r in host_wide][:3] == ["Denylist", "NVML Library", "CUDA Main Library"]
    assert all(r["category"] == "Deployment" for r in host_wide)
    per_gpu = dict((r["test"], r["result"]) for r in data["rows"] if r["gpu"] == 0)
    assert per_gpu["EUD Test"] == "skip" and per_gpu["Targeted Power"] == "pass" and per_gpu["GPU Memory"] == "pass"
    memory = next(r for r in data["rows"] if r["test"] == "GPU Memory")
    assert memory["info"] and memory["info"][0].startswith("GPU 0 Allocated")


def test_text_before_the_json_is_ignored():
    data = dcgm.read_diag("Successfully ran diagnostic for group.\n" + text(T4_R2), 0)
    assert ("PCIe", 0, "pass") in rows_of(data)


# ---------------------------------------------------------------- other generations, planted in copies


def _as_33(raw):
    """A 3.1 recording turned into DCGM 3.3's shape: gpu_id per result, warnings as objects, version keys."""
    out = copy.deepcopy(raw)
    root = out["DCGM GPU Diagnostic"]
    root["version"] = "3.3.8"
    for category in root["test_categories"]:
        for test in category["tests"]:
            for result in test["results"]:
                if "gpu_ids" in result:
                    result["gpu_id"] = result.pop("gpu_ids")
    return out


def test_dcgm_33_gpu_id_and_warning_objects():
    raw = _as_33(doc(T4_R3))
    power = next(t for c in raw["DCGM GPU Diagnostic"]["test_categories"] for t in c["tests"] if t["name"] == "Targeted Power")
    power["results"][0].update(status="Fail", warnings=[{"warning": "Detected 1 power violations", "error_id": 41,
                                                         "error_category": 9, "error_severity": 2}])
    deployment = raw["DCGM GPU Diagnostic"]["test_categories"][0]["tests"][4]
    # dcgmi 3.3 writes a Deployment warning's message under "warnings" and the GPU as a number.
    deployment["results"][0].update(status="Pass", warnings=[{"warnings": "Persistence mode for GPU 0 is disabled.",
                                                              "gpu_id": 0, "error_id": 29, "error_severity": 1}])
    data = dcgm.parse_diag_json(raw)
    assert data["format"] == "3.3" and data["version"] == "3.3.8"
    row = next(r for r in data["rows"] if r["test"] == "Targeted Power")
    assert (row["gpu"], row["result"], row["id_key"]) == (0, "fail", "gpu_id")
    assert row["warnings"] == [{"message": "Detected 1 power violations", "error_id": 41, "error_category": 9, "error_severity": 2}]
    assert data["rows"][4]["warnings"][0]["message"] == "Persistence mode for GPU 0 is disabled."


def test_dcgm_2x_one_result_for_several_gpus_is_a_row_each():
    raw = doc(T4_R2)
    memory = raw["DCGM GPU Diagnostic"]["test_categories"][2]["tests"][0]
    memory["results"] = [{"gpu_ids": "0,1,2,3", "status": "PASS"}]  # DCGM 2.x test strings: upper case, a list of GPUs
    data = dcgm.parse_diag_json(raw)
    assert [(r["gpu"], r["result"]) for r in data["rows"] if r["test"] == "GPU Memory"] == [(0, "pass"), (1, "pass"), (2, "pass"), (3, "pass")]


def test_dcgm_4x_not_run_cpu_entities_and_iterations():
    raw = doc(GB10_R2_ALLOWED)
    tests = raw["DCGM Diagnostic"]["test_categories"]
    tests[1]["tests"][0]["results"].append({"entity_group": "CPU", "entity_group_id": 7, "entity_id": 1, "status": "Not Run"})
    data = dcgm.parse_diag_json(raw)
    cpu = data["rows"][2]
    assert (cpu["entity_group"], cpu["entity_id"], cpu["gpu"], cpu["result"]) == ("CPU", 1, None, "notrun")
    wrapped = dcgm.parse_diag_json({"iterations": [doc(GB10_R1), doc(GB10_R2_ALLOWED)], "Overall Result": "Fail"})
    assert wrapped["iterations"] == 2 and wrapped["overall_result"] == "Fail"
    assert [(r["iteration"], r["test"]) for r in wrapped["rows"]] == [(0, "software"), (1, "software"), (1, "memory"), (1, "pcie")]


# ---------------------------------------------------------------- unreadable output is a ProbeError with the reason


def test_recorded_document_whose_root_is_a_list_is_an_error_naming_it():
    with pytest.raises(ProbeError, match=r"'DCGM GPU Diagnostic' is a list, not an object with test_categories"):
        dcgm.read_diag(text(T4_ROOT_LIST), 226)


@pytest.mark.parametrize("stdout, rc, message", [
    ("", 0, r"printed no JSON \(rc 0\): no output"),
    ("Error: unable to establish a connection to the specified host: localhost\n", 255,
     r"exited with rc 255 \(bad parameter\) without a JSON result: Error: unable to establish a connection"),
    ('{"DCGM GPU Diagnostic": {"test_categories": [', 226, "output is not valid JSON"),
    ('{"something": 1}', 0, r"no 'DCGM GPU Diagnostic' or 'DCGM Diagnostic' object in the document \(keys: something\)"),
    ('{"DCGM Diagnostic": {"version": "4.2.3", "runtime_error": "Couldn\'t find the ubergemm executable"}}', 235,
     "dcgmi diag could not run: Couldn't find the ubergemm executable"),
    ('{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "memory", "results": '
     '[{"entity_group": "GPU", "entity_id": 0, "status": "Maybe"}]}]}]}}', 0,
     r"memory has status 'Maybe'; accepted: Pass, Fail, Warn, Skip, Not Run"),
    ('{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "memory", "results": '
     '[{"gpu_id": "zero", "status": "Pass"}]}]}]}}', 0, r"test 'memory' names gpu_id 'zero', not a number"),
    ('[1, 2]', 0, r"printed no JSON \(rc 0\): \[1, 2\]"),
])
def test_malformed_output_names_what_is_wrong(stdout, rc, message):
    with pytest.raises(ProbeError, match=message):
        dcgm.read_diag(stdout, rc)
    with pytest.raises(ProbeError, match="the JSON is a list, not an object"):
        dcgm.parse_diag_json([1, 2])


# ---------------------------------------------------------------- the probe, with a fake dcgmi replaying a recording


def _fake_dcgmi(tmp_path, recording, rc, args_file):
    body = "#!/bin/sh\necho \"$@\" > '%s'\ncat '%s'\nexit %d\n" % (args_file, fixture_path("dcgm-diag", *recording), rc)
    path = tmp_path / "dcgmi"
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(tmp_path)


def test_probe_runs_dcgmi_diag_with_the_level_and_host_and_reads_json_before_the_exit_code(tmp_path, monkeypatch):
    args = str(tmp_path / "args")
    monkeypatch.setenv("PATH", _fake_dcgmi(tmp_path, GB10_R2_ALLOWED, 226, args) + os.pathsep + os.environ["PATH"])
    expect = {"dcgm_diag_level": 3, "dcgm_host": "nvidia-dcgm.gpu-operator.svc:5555"}
    options = doctor.probe_options(expect, level="deep")
    assert options["timeouts"]["dcgm_diag"] == dcgm.DIAG_TIMEOUTS[3]
    data = dcgm.probe_dcgm_diag(options)
    with open(args) as handle:
        assert handle.read().split() == ["diag", "-r", "3", "-j", "--host", "nvidia-dcgm.gpu-operator.svc:5555"]
    assert data["exit_code"] == 226 and data["level"] == 3 and rows_of(data)[0] == ("software", 0, "fail")


def test_probe_absent_without_dcgmi_and_timeout_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ProbeAbsent, match="dcgmi not found"):
        dcgm.probe_dcgm_diag(doctor.probe_options({}))
    hang = tmp_path / "dcgmi"
    hang.write_text("#!/bin/sh\nexec sleep 30\n")
    hang.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + "/usr/bin:/bin")
    with pytest.raises(ProbeError, match=r"diag -r 2 -j timed out after 0.5s"):
        dcgm.probe_dcgm_diag(doctor.probe_options({}, timeouts={"dcgm_diag": 0.5}))

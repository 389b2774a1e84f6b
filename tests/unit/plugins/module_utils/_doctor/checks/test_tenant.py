"""tenant.slo: the state machine across runs as doctor's run keeps it, the FAIL naming tenant and bully, garbage."""

import json
import os

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import tenants
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.module_utils._status import READ_ABSENT, READ_OK

NOW = 1795521600.0
TENANT = {"pid": 4100, "comm": "serve", "cmdline": "serve --port 80", "cgroup": "/kubepods/pod-a", "key": "4100:777",
          "starttime": 777, "p99_ms": 250.0, "file": "/m/4100.metric", "written_at": NOW}
DD = {"pid": 4200, "comm": "dd", "cmdline": "dd of=x oflag=direct", "cgroup": "/kubepods/pod-b", "read_bps": 0.0,
      "write_bps": 12e6, "io_bps": 12e6, "gpu_memory_mib": None, "gpu_uuids": []}
TRAIN = {"pid": 4300, "comm": "train", "cmdline": "python train.py", "cgroup": "/kubepods/pod-c", "read_bps": 0.0,
         "write_bps": 0.0, "io_bps": 0.0, "gpu_memory_mib": 30000, "gpu_uuids": ["GPU-b"]}


def data(state_path, p99=250.0, previous=None, garbage=(), stale=(), processes=(DD, TRAIN)):
    tenant = dict(TENANT, p99_ms=p99)
    return {"metrics_dir": "/m", "tenants": [tenant], "stale": list(stale), "garbage": list(garbage),
            "processes": [dict(tenant, read_bps=0.0, write_bps=0.0, io_bps=0.0, gpu_memory_mib=None, gpu_uuids=["GPU-b"])]
            + list(processes), "io_unreadable": 0, "gpu_source": "nvidia-smi", "gpu_reason": None, "io_sample_s": 1.0,
            "devices": ["254:0"], "state_path": state_path, "previous": previous, "state_problem": None, "now": NOW}


SMI = {"status": READ_OK, "data": {"gpus": [{"index": 0, "uuid": "GPU-a"}, {"index": 1, "uuid": "GPU-b"}]}, "reason": None}
EXPECT = {"tenant_slo_p99_ms": 100, "tenant_persistence_runs": 2, "tenant_cooldown_runs": 1,
          "tenant_io_limit_max_bps": 50000000, "tenant_io_limit_min_bps": 1000000}


def doctor_run(tmp_path, **given):
    """One doctor run over the probe data (the rest of doctor real: run.run, the registry, persist_states)."""
    state_path = str(tmp_path / "state" / tenants.STATE_FILE)
    previous = None
    if os.path.exists(state_path):
        with open(state_path) as handle:
            previous = json.load(handle)
    table = {"host": lambda options: {"hostname": "n1"}, "nvidia_smi": lambda options: SMI["data"],
             "tenants": lambda options: data(state_path, previous=previous, **given)}
    result = doctor.run(only=["tenant.slo"], expect=EXPECT, probes=table, state_dir=str(tmp_path / "state"))
    return result["checks"][0]


def test_warn_then_fail_naming_tenant_and_bully_then_cooldown_then_normal(tmp_path):
    first = doctor_run(tmp_path)
    assert first["status"] == "WARN" and "tenant PID 4100 (serve) over its p99 SLO: 250 ms > 100 ms (1 of 2" in first["message"]
    assert first["details"]["persist"]["written"] is True

    second = doctor_run(tmp_path)
    assert second["status"] == "FAIL"
    assert "tenant PID 4100 (serve, cgroup /kubepods/pod-a) VIOLATED" in second["message"]
    assert "likely bully PID 4200 (dd, cgroup /kubepods/pod-b, 12.0 MB/s)" in second["message"]
    assert "PID 4300 (train, no I/O)" in second["message"]
    tenant = second["details"]["tenants"][0]
    assert [b["pid"] for b in tenant["bullies"]] == [4200, 4300]  # never the tenant itself
    # 2.5 x over: 12 MB/s / 2.5 = 4.8 MB/s, within [1 MB/s, 50 MB/s]
    assert tenant["mitigation"]["cgroup_limits"] == [
        {"name": "tenant-bully-4200", "pids": [4200], "io_max": [{"device": "254:0", "rbps": 4800000, "wbps": 4800000}]}]
    assert "tier 1: cgroup_limits" in second["remediation"] and "mig role" in second["remediation"]

    back = doctor_run(tmp_path, p99=50.0)
    assert back["status"] == "PASS" and back["details"]["tenants"][0]["state"] == tenants.COOLDOWN
    # Inside COOLDOWN a reading over the SLO is not judged; then NORMAL and judged again.
    assert doctor_run(tmp_path, p99=500.0)["details"]["tenants"][0]["state"] == tenants.NORMAL
    assert doctor_run(tmp_path, p99=500.0)["details"]["tenants"][0]["state"] == tenants.DEGRADED
    with open(str(tmp_path / "state" / tenants.STATE_FILE)) as handle:
        document = json.load(handle)
    assert document["schema"] == 1 and document["runs"] == 5 and list(document["tenants"]) == ["4100:777"]


def test_tier2_with_the_gpus_when_tier1_did_not_help(tmp_path):
    doctor_run(tmp_path)
    doctor_run(tmp_path)
    path = str(tmp_path / "state" / tenants.STATE_FILE)
    with open(path) as handle:
        document = json.load(handle)
    document["tenants"]["4100:777"]["tier1"] = {"pid": 4200, "violated_runs": 1}  # as the guard records it
    with open(path, "w") as handle:
        json.dump(document, handle)
    assert doctor_run(tmp_path)["details"]["tenants"][0]["mitigation"]["tier"] == 1
    plan = doctor_run(tmp_path)["details"]["tenants"][0]["mitigation"]
    assert plan["tier"] == 2 and plan["mig_gpus"] == ["1"]


def test_check_mode_writes_no_state(tmp_path):
    table = {"host": lambda options: {}, "nvidia_smi": lambda options: SMI["data"],
             "tenants": lambda options: data(str(tmp_path / "s" / "tenants.json"))}
    result = doctor.run(only=["tenant.slo"], expect=EXPECT, probes=table, state_dir=str(tmp_path / "s"), persist=False)
    assert result["checks"][0]["details"]["persist"] == {"path": str(tmp_path / "s" / "tenants.json"), "written": False,
                                                         "error": None}
    assert not os.path.exists(str(tmp_path / "s"))


def test_an_unwritable_state_is_never_healthy(tmp_path):
    (tmp_path / "file").write_text("")
    state_path = str(tmp_path / "file" / "tenants.json")  # a directory that is a file
    table = {"host": lambda options: {}, "nvidia_smi": lambda options: SMI["data"],
             "tenants": lambda options: data(state_path, p99=10.0)}
    record = doctor.run(only=["tenant.slo"], expect=EXPECT, probes=table)["checks"][0]
    assert record["status"] == "WARN" and "state not saved" in record["message"]


def judge(envelope, expect=None):
    chk = [c for c in CATALOGUE if c.id == "tenant.slo"][0]
    return registry.evaluate(chk, {"tenants": envelope, "nvidia_smi": SMI}, expect if expect is not None else EXPECT)


def test_garbage_and_a_bad_state_file_warn_and_stale_is_listed():
    envelope = {"status": READ_OK, "reason": None, "data": data(
        "/s/tenants.json", p99=10.0, previous={"unparsable": True}, garbage=[{"file": "/m/7.metric", "reason": "binary content"}],
        stale=[{"file": "/m/8.metric", "pid": 8, "reason": "no process 8 (the tenant has exited)"}])}
    record = judge(envelope)
    assert record["status"] == "WARN"
    assert "/m/7.metric: binary content" in record["message"] and "not a schema 1 tenant state file" in record["message"]
    assert record["details"]["stale"][0]["pid"] == 8
    only_stale = judge({"status": READ_OK, "reason": None, "data": data("/s/t.json", p99=10.0, stale=[{"file": "/m/8.metric"}])})
    assert only_stale["status"] == "PASS" and "1 stale metric file" in only_stale["message"]


def test_skip_without_a_slo_or_without_the_metrics_dir():
    envelope = {"status": READ_OK, "reason": None, "data": data("/s/t.json")}
    assert judge(envelope, {})["status"] == "SKIP"
    absent = {"status": READ_ABSENT, "data": None, "reason": "/var/run/tenant_metrics does not exist"}
    assert judge(absent)["status"] == "SKIP"

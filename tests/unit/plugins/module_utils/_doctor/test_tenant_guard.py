"""hydra-tenant-guard's ticks: the real tenants probe on a real tenant process, its process table planted with a
bully (a real process) writing 12 MB/s; tier 1 applied by the real cgroup_limits lifecycle on a cgroup v2 tree laid
out in tmp_path; the state doctor keeps; main()'s exit codes and one-line errors."""

import json
import subprocess

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import tenant_guard, tenants
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import tenant as tenant_probes
from ansible_collections.continuum.hydra.plugins.module_utils._remediate import apply, cgroups
from ansible_collections.continuum.hydra.tests.support.doctor_probes import probe_table

SLO = 100
BULLY_BPS = 12e6
DEVICE = "259:0"


@pytest.fixture
def node(tmp_path):
    """A tenant (a real sleep) 2.5x over its SLO, a bully (another sleep), a v2 cgroup root with the io controller."""
    tenant, bully = subprocess.Popen(["sleep", "600"]), subprocess.Popen(["sleep", "600"])
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    (metrics / ("%d.metric" % tenant.pid)).write_text("p99_latency_ms: 250\n")
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text("")
    (root / "cgroup.procs").write_text("1\n")
    config = {"state_dir": str(tmp_path / "state"), "cgroup_root": str(root), "cgroup_parent": "hydra.slice",
              "expect": {"tenant_metrics_dir": str(metrics), "tenant_slo_p99_ms": SLO, "tenant_persistence_runs": 2,
                         "tenant_io_sample_s": 0.05, "tenant_io_devices": [DEVICE]}}
    yield {"tenant": tenant.pid, "bully": bully.pid, "root": root, "config": config, "state": tmp_path / "state"}
    for proc in (tenant, bully):
        proc.kill()
        proc.wait()


def tick(node, mode):
    """One tick; the real probe's process table edited to the tenant and the bully, which writes BULLY_BPS."""
    def probe(options):
        data = tenant_probes.probe_tenants(options)
        quiet = {"read_bps": 0.0, "write_bps": 0.0, "io_bps": 0.0, "gpu_memory_mib": None, "gpu_uuids": []}
        data["processes"] = [dict(tenant_probes.describe(node["tenant"]), **quiet),
                             dict(tenant_probes.describe(node["bully"]), **dict(quiet, write_bps=BULLY_BPS, io_bps=BULLY_BPS))]
        return data
    return tenant_guard.tick(dict(node["config"], mode=mode), apply, cgroups.CgroupLimitsWorker,
                             probes=probe_table(tenants=probe))


def read_json(path):
    with open(str(path)) as handle:
        return json.load(handle)


def test_enforce_limits_the_bully_once_and_records_tier1_in_doctors_state(node):
    first = tick(node, "enforce")
    assert first["status"] == "WARN" and first["actions"] == []  # DEGRADED: one run over of two
    assert not (node["root"] / "hydra.slice").exists()

    second = tick(node, "enforce")
    bully, group = node["bully"], node["root"] / "hydra.slice" / ("tenant-bully-%d" % node["bully"])
    action = second["actions"][0]
    limit = int(BULLY_BPS / 2.5)  # 2.5 x over the SLO
    assert second["status"] == "FAIL" and action["tenant_pid"] == node["tenant"] and action["tier"] == 1
    assert action["applied"] is True and action["changed"] is True and action["cgroup_version"] == "v2"
    assert action["cgroup_limits"] == [{"name": "tenant-bully-%d" % bully, "pids": [bully],
                                        "io_max": [{"device": DEVICE, "rbps": limit, "wbps": limit}]}]
    assert (group / "io.max").read_text() == "%s rbps=%d wbps=%d" % (DEVICE, limit, limit)
    assert (group / "cgroup.procs").read_text().split() == [str(bully)]
    assert (node["root"] / "cgroup.subtree_control").read_text() == "+io"
    assert read_json(node["state"] / tenant_guard.GUARD_FILE) == second
    record = list(read_json(node["state"] / tenants.STATE_FILE)["tenants"].values())[0]
    assert record["state"] == tenants.VIOLATED
    assert record["tier1"] == {"pid": bully, "at": second["at"], "violated_runs": 1, "limit_bps": limit,
                               "cgroup": "hydra.slice/tenant-bully-%d" % bully}

    # The next tick keeps the limit it applied (the throttled rate does not scale it down) and changes nothing.
    third = tick(node, "enforce")
    assert third["actions"][0]["changed"] is False and third["actions"][0]["changes"] == []
    assert list(read_json(node["state"] / tenants.STATE_FILE)["tenants"].values())[0]["tier1"] == record["tier1"]


def test_recommend_writes_the_plan_and_changes_nothing(node):
    tick(node, "recommend")
    report = tick(node, "recommend")
    action = report["actions"][0]
    assert action["tier"] == 1 and action["applied"] is False and action["changes"] == [] and "changed" not in action
    assert "limit PID %d (sleep)" % node["bully"] in action["why"]
    assert read_json(node["state"] / tenant_guard.GUARD_FILE) == report
    assert not (node["root"] / "hydra.slice").exists()
    assert list(read_json(node["state"] / tenants.STATE_FILE)["tenants"].values())[0].get("tier1") is None


def test_a_tier1_that_cannot_be_applied_is_one_line(node):
    (node["root"] / "cgroup.controllers").unlink()  # neither v1 nor v2: the worker refuses
    tick(node, "enforce")
    with pytest.raises(tenant_guard.GuardError, match=r"^tier 1 failed: .*is neither cgroup v2"):
        tick(node, "enforce")


def run_main(capsys, *argv):
    code = tenant_guard.main(list(argv), apply, cgroups.CgroupLimitsWorker)
    out, err = capsys.readouterr()
    return code, out, err


def test_main_ticks_on_the_real_probe_and_prints_the_report(tmp_path, capsys):
    (tmp_path / "metrics").mkdir()
    config = tmp_path / "guard.json"
    config.write_text(json.dumps({"mode": "recommend", "state_dir": str(tmp_path / "state"),
                                  "expect": {"tenant_metrics_dir": str(tmp_path / "metrics"), "tenant_slo_p99_ms": SLO,
                                             "tenant_io_sample_s": 0.05}}))
    code, out, err = run_main(capsys, "--config", str(config))
    assert code == 0 and err == ""
    report = json.loads(out)
    assert report["mode"] == "recommend" and report["status"] == "PASS" and report["actions"] == []
    assert read_json(tmp_path / "state" / tenant_guard.GUARD_FILE) == report


@pytest.mark.parametrize("content, message", [
    (None, "No such file or directory"),
    ("{not json", "Expecting property name"),
    ('["enforce"]', "mode None is not one of recommend, enforce"),
    ('{"mode": "destroy"}', "mode 'destroy' is not one of recommend, enforce"),
    ('{"mode": "recommend", "expect": {"tenant_slo_p99_ms": "fast"}}', "tenant_slo_p99_ms"),
])
def test_main_with_a_bad_config_is_one_line_and_exit_2(tmp_path, capsys, content, message):
    config = tmp_path / "guard.json"
    if content is not None:
        config.write_text(content)
    code, out, err = run_main(capsys, "--config", str(config))
    assert code == 2 and out == "" and err.startswith("hydra-tenant-guard: ") and message in err
    assert err.count("\n") == 1


def test_main_without_its_one_option_says_how_to_call_it(capsys):
    assert run_main(capsys) == (2, "", "usage: hydra-tenant-guard --config PATH\n")
    assert run_main(capsys, "--conf", "x")[0] == 2

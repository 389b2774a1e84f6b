"""Fleet analysis on synthetic fleets with planted anomalies: classes, drift, stragglers, bottleneck, batch plan.

Every test asserts exactly which hosts (and GPUs) are found, and so which are not.
"""

import copy
import re

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue as probe_catalogue
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvidia_smi
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import stats
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.batch_plan import BatchPlanError, plan_batches
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.classes import memory_bucket_gib
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.drift import ExpectedVersionsError, parse_expected
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.profile_summary import profile_summary
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _views
from ansible_collections.continuum.hydra.tests.support.fleet_factory import GIB, SyntheticFleet, doctor_result, environment, recorded_smi
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

A100 = "8x NVIDIA A100-SXM4-80GB | AMD EPYC 7763 64-Core Processor | 1024 GiB"
A10G = "4x NVIDIA A10G | AMD EPYC 7R32 | 192 GiB"
T4 = "1x Tesla T4 | Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz | 64 GiB"
ADA = "2x NVIDIA RTX 4000 SFF Ada Generation | Intel(R) Xeon(R) w5-2455X | 256 GiB"


def _analysed(fleet, options=None, collector=None):
    report = (collector or fleet.collector()).build("2026-11-22T13:00:00+00:00", "doctor.yml")
    return analyse(report, options or AnalysisOptions())["analysis"]


# ---------------------------------------------------------------- statistics (metric conventions: test_figures.py)

def test_robust_spread_uses_mad_then_mean_absolute_deviation():
    spread = stats.Spread([10.0, 11.0, 12.0, 13.0, 100.0])
    assert (spread.median, spread.mad, spread.method) == (12.0, 1.0, "mad")
    assert spread.score(12.0 - 3.5 / stats.MAD_SCALE) == pytest.approx(-3.5)
    # more than half identical: MAD is 0, the scaled mean absolute deviation takes over
    flat = stats.Spread([5.0, 5.0, 5.0, 5.0, 4.0])
    assert (flat.mad, flat.method) == (0.0, "meanad")
    assert flat.score(4.0) == pytest.approx(-1.0 / (0.2 * stats.MEANAD_SCALE))
    assert stats.Spread([7.0, 7.0]).score(7.0) == 0.0 and stats.Spread([7.0, 7.0]).method == "identical"


@pytest.mark.parametrize("gib, bucket", [(503, 512), (1007, 1024), (755, 768), (187, 192), (62, 64), (251, 256), (2015, 2048)])
def test_memtotal_maps_to_the_installed_size(gib, bucket):
    assert memory_bucket_gib(gib * GIB) == bucket


# ---------------------------------------------------------------- classes

def test_automatic_classes_split_on_gpu_model_and_count_cpu_and_memory():
    fleet = SyntheticFleet({"a100x8": 4, "a10gx4": 3, "t4x1": 2, "ada4000x2": 2})
    collector = fleet.collector()
    collector.add_unreachable("gone", "Connection refused")
    broken = copy.deepcopy(fleet.hosts["a100x8-00000"]["doctor"])
    broken["environment"]["gpus"] = []
    broken["probes"]["nvidia_smi"] = {"status": "error", "reason": "nvidia-smi -q -x timed out after 30s"}
    collector.add_doctor("smi-hangs", broken)
    analysis = _analysed(fleet, collector=collector)
    assert sorted(analysis["classes"]) == sorted([A100, A10G, T4, ADA])
    assert analysis["classes"][A100]["hosts"] == fleet.names("a100x8")
    assert analysis["classes"][ADA]["hosts"] == fleet.names("ada4000x2")
    assert analysis["classes"][A100]["status"]["healthy"] == 4 and analysis["classes"][A100]["memory_gib"] == 1024
    # no facts, or GPUs unknown because nvidia-smi failed: no class rather than a wrong one
    assert analysis["unclassified"] == ["gone", "smi-hangs"]


def test_inventory_groups_define_classes_when_asked():
    fleet = SyntheticFleet({"a100x8": 3, "a10gx4": 3})
    collector = fleet.collector()
    for host in fleet.names("a100x8")[:2] + fleet.names("a10gx4")[:1]:
        collector.set_groups(host, ["all", "rack_a", "training"])
    collector.set_groups(fleet.names("a10gx4")[1], ["all", "training"])
    options = AnalysisOptions(class_groups=["rack_a", "training"], host_groups=collector.groups)
    analysis = _analysed(fleet, options, collector)
    assert analysis["classes"]["rack_a"]["hosts"] == fleet.names("a100x8")[:2] + fleet.names("a10gx4")[:1]
    assert analysis["classes"]["rack_a"]["basis"] == "group"
    assert analysis["classes"]["training"]["hosts"] == [fleet.names("a10gx4")[1]]
    # in none of the groups: automatic
    assert analysis["classes"][A100]["hosts"] == [fleet.names("a100x8")[2]]
    assert analysis["classes"][A10G]["hosts"] == [fleet.names("a10gx4")[2]]


# ---------------------------------------------------------------- drift

def test_drift_names_exactly_the_planted_hosts_fields_and_gpus():
    fleet = SyntheticFleet({"a100x8": 7, "a10gx4": 5})
    a100, a10g = fleet.names("a100x8"), fleet.names("a10gx4")
    fleet.set_env(a100[1], "driver_version", "550.54.15")
    fleet.set_env(a100[2], "kernel", "6.1.0-21-amd64")
    fleet.set_env(a100[3], "ecc_mode", "Disabled", gpu_index=5)
    fleet.set_env(a100[3], "vbios_version", "92.00.45.00.03", gpu_index=0)
    fleet.set_env(a10g[0], "nccl_settings", {"NCCL_IB_DISABLE": {"value": "1", "source": "environment"}})
    fleet.set_env(a10g[4], "pcie_width_max", 8, gpu_index=2)
    fleet.set_env(a10g[4], "persistence_mode", "Enabled")  # not a GPU key: ignored, not a crash
    torch_check = fleet.hosts[a10g[2]]["doctor"]["checks"][3]
    torch_check["details"]["version"] = "2.4.0+cu121"
    # a host that lost a GPU forms its own automatic class, yet its GPU count is judged against its family
    lost = fleet.hosts[a100[6]]["doctor"]["environment"]["gpus"]
    del lost[7]
    analysis = _analysed(fleet)
    found = sorted((i["host"], i["field"], i["value"], i["reference"], i["basis"]) for i in analysis["drift"]["items"])
    assert found == [
        (a100[1], "driver_version", "550.54.15", "535.54.03", "majority"),
        (a100[2], "kernel", "6.1.0-21-amd64", "6.1.0-18-amd64", "majority"),
        (a100[3], "ecc_mode", "disabled, enabled", "enabled", "majority"),
        (a100[3], "vbios_version", "92.00.36.00.02, 92.00.45.00.03", "92.00.36.00.02", "majority"),
        (a100[6], "gpu_count", "7", "8", "majority"),
        (a10g[0], "nccl_env", "NCCL_IB_DISABLE=1", "(unset)", "majority"),
        (a10g[2], "torch_version", "2.4.0+cu121", "2.5.1+cu124", "majority"),
        (a10g[4], "pcie_width", "16, 8", "16", "majority"),
    ]
    ecc = [i for i in analysis["drift"]["items"] if i["field"] == "ecc_mode"][0]
    assert [(g["index"], g["value"]) for g in ecc["gpus"]] == [(5, "disabled")]
    assert analysis["drift"]["hosts"] == sorted(set(f[0] for f in found))
    assert analysis["drift"]["splits"] == []


def test_a_field_without_majority_is_a_split_and_blames_nobody():
    fleet = SyntheticFleet({"a10gx4": 4})
    hosts = fleet.names("a10gx4")
    for host in hosts[:2]:
        fleet.set_env(host, "kernel", "6.1.0-21-amd64")
    analysis = _analysed(fleet)
    assert analysis["drift"]["items"] == []
    assert analysis["drift"]["splits"] == [{"group": A10G, "field": "kernel", "values": {"6.1.0-18-amd64": 2, "6.1.0-21-amd64": 2}}]
    assert analysis["drift"]["majority"][A10G]["kernel"] is None


def test_expected_versions_pin_golden_values_for_all_or_per_class():
    fleet = SyntheticFleet({"a100x8": 5, "a10gx4": 5})
    a100 = fleet.names("a100x8")
    fleet.set_env(a100[0], "driver_version", "550.54.15")
    expected = parse_expected("""
driver_version: ["550.54.15", "550.90.07"]
classes:
  "%s":
    driver_version: 515.105.01
    ecc_mode: Enabled
""" % A10G)
    analysis = _analysed(fleet, AnalysisOptions(expected=expected))
    found = sorted((i["host"], i["field"], i["value"], i["reference"], i["basis"]) for i in analysis["drift"]["items"])
    # every A100 but the upgraded one misses the pinned versions; the A10G class has its own pin, which it meets
    assert found == [(h, "driver_version", "535.54.03", "550.54.15 or 550.90.07", "expected") for h in a100[1:]]
    assert analysis["drift"]["pinned"] == ["driver_version", "ecc_mode"]


@pytest.mark.parametrize("content, message", [
    ("driver: 1.0", "unknown field 'driver'; accepted: gpu_count, driver_version"),
    ("driver_version: {a: 1}", "driver_version: {'a': 1} is not a version string or number"),
    ("driver_version: []", "driver_version: an empty list accepts nothing"),
    ("- a\n- b", "expected a mapping at the top, got list"),
    ("classes: [x]", "classes: expected a mapping of class name to fields, got list"),
    ("classes: {gpu-a: {kernal: x}}", "classes.gpu-a: unknown field 'kernal'"),
    ("driver_version: [1.0\n", "not valid YAML/JSON"),
])
def test_a_bad_expected_versions_file_is_one_clear_line(content, message):
    with pytest.raises(ExpectedVersionsError) as info:
        parse_expected(content, "golden.yml")
    text = str(info.value)
    assert message in text and text.startswith("golden.yml") and "\n" not in text


def _real_doctor(host, xml, driver=None):
    """A doctor result from the real checks run on a recorded nvidia-smi XML (probes replaced, nothing faked)."""
    def absent(options):
        raise ProbeAbsent("not on this test host")
    if driver:
        xml = xml.replace("<driver_version>535.54.03</driver_version>", "<driver_version>%s</driver_version>" % driver)
    table = dict((name, absent) for name in probe_catalogue.PROBES)
    table["host"] = lambda options: {"hostname": host, "kernel": "6.1.0-18-amd64", "cpu_model": "AMD EPYC 7763 64-Core Processor",
                                     "memory_total_bytes": 1007 * GIB, "nccl_settings": {}}
    table["nvidia_smi"] = lambda options: parse_nvidia_smi(xml)
    return _doctor.run(only=["gpu.persistence_mode", "gpu.ecc_mode", "gpu.mig", "gpu.pcie_link", "driver.version"], probes=table)


def test_drift_from_real_doctor_checks_on_a_recorded_nvidia_smi():
    xml = read_fixture("nvidia-smi", "a100-sxm4-v12.xml")
    persistence_on = xml.replace("<persistence_mode>Disabled</persistence_mode>", "<persistence_mode>Enabled</persistence_mode>", 1)
    ecc_off = re.sub(r"(<ecc_mode>\s*<current_ecc>)Enabled(</current_ecc>)", r"\1Disabled\2", persistence_on, count=1)
    assert ecc_off != persistence_on
    collector = FleetCollector()
    for n in range(4):
        collector.add_doctor("a100-%d" % n, _real_doctor("a100-%d" % n, persistence_on))
    collector.add_doctor("a100-persistence-off", _real_doctor("a100-persistence-off", xml))
    collector.add_doctor("a100-ecc-off", _real_doctor("a100-ecc-off", ecc_off))
    collector.add_doctor("a100-new-driver", _real_doctor("a100-new-driver", persistence_on, driver="550.54.15"))
    report = analyse(collector.build("t"))
    found = sorted((i["host"], i["field"], i["value"], i["reference"]) for i in report["analysis"]["drift"]["items"])
    assert found == [("a100-ecc-off", "ecc_mode", "disabled", "enabled"),
                     ("a100-new-driver", "driver_version", "550.54.15", "535.54.03"),
                     ("a100-persistence-off", "persistence_mode", "disabled", "enabled")]


# ---------------------------------------------------------------- stragglers

def test_stragglers_are_exactly_the_slowed_hosts_and_gpus_with_the_metric_to_blame():
    fleet = SyntheticFleet({"a100x8": 40, "a10gx4": 30, "t4x1": 12}, seed=3, cv=0.02)
    a100, a10g, t4 = fleet.names("a100x8"), fleet.names("a10gx4"), fleet.names("t4x1")
    fleet.slow_host(a100[3], 0.85, "triad_gbps")             # -15 %
    fleet.slow_host(a100[17], 0.70)                           # every figure -30 % (latency +43 %)
    fleet.slow_host(a10g[5], 0.78, "allreduce_latency_us")    # a latency: higher is slower
    fleet.slow_host(t4[2], 0.80, "read_iops")
    slow_gpu = fleet.slow_gpu(a10g[9], 2, 0.75)               # one GPU -25 % bf16
    slow_hbm = fleet.slow_gpu(a100[30], 7, 0.82, "hbm_gbps")
    fleet.slow_host(a100[20], 1.30, "triad_gbps")             # faster: never a straggler
    fleet.slow_host(a100[21], 0.95, "triad_gbps")             # 5 % slower: within the rule
    analysis = _analysed(fleet)["stragglers"]
    hosts = dict((s["host"], s) for s in analysis["hosts"])
    assert sorted(hosts) == sorted([a100[3], a100[17], a10g[5], t4[2]])
    assert hosts[a100[3]]["metric"] == "triad_gbps" and hosts[a100[3]]["ratio"] == pytest.approx(0.85, abs=0.05)
    assert hosts[a100[17]]["class"] == A100
    assert sorted(m["metric"] for m in hosts[a100[17]]["metrics"]) == [
        "allreduce_latency_us", "cpu_gflops_all_cores", "read_iops", "triad_gbps"]
    assert hosts[a10g[5]]["metric"] == "allreduce_latency_us" and hosts[a10g[5]]["robust_z"] < -3.5
    assert [(s["host"], s["uuid"], s["index"], s["metric"]) for s in analysis["gpus"]] == [
        (a100[30], slow_hbm, 7, "hbm_gbps"), (a10g[9], slow_gpu, 2, "bf16_tflops")]
    assert analysis["host_metrics"]["triad_gbps"]["classes"][A100]["n"] == 40
    assert analysis["host_metrics"]["allreduce_latency_us"]["lower_is_better"] is True


def test_a_class_with_too_few_peers_is_not_judged():
    fleet = SyntheticFleet({"ada4000x2": 4, "a10gx4": 6})
    fleet.slow_host(fleet.names("ada4000x2")[0], 0.5, "triad_gbps")
    analysis = _analysed(fleet)["stragglers"]
    assert analysis["hosts"] == []
    assert analysis["too_few_peers"]["hosts"] == {ADA: ["allreduce_latency_us", "cpu_gflops_all_cores", "read_iops", "triad_gbps"]}
    # 8 GPUs are enough peers for the per-GPU figures
    assert ADA in analysis["gpu_metrics"]["bf16_tflops"]["classes"]


def test_the_profile_modules_own_summary_is_analysed():
    """profile_summary() rows name GPUs by index with flat figures; doctor's environment supplies the UUIDs."""
    collector = FleetCollector()
    smi = recorded_smi("a10g.xml")
    uuids = {}
    for n in range(6):
        host = "a10g-%d" % n
        gpus = []
        for index in range(4):
            gpu = copy.deepcopy(smi["gpus"][0])
            gpu.update(index=index, uuid="GPU-%d-%d" % (n, index))
            gpus.append(gpu)
        env = environment(host, smi, gpus, "AMD EPYC 7R32", 187 * GIB)
        collector.add_doctor(host, doctor_result(env))
        tflops = [62.0, 61.5, 62.4, 61.8]
        if n == 4:
            tflops[1] = 45.0
        result = {"schema_version": "1.0.0",
                  "benchmarks": {"memory_bandwidth": {"status": "ok", "triad_gbps": 90.0 if n != 2 else 60.0, "method": "c_stream"},
                                 "gpu_sustained": {"status": "ok", "gpus": [
                                     {"index": i, "name": "NVIDIA A10G", "status": "ok", "bf16_tflops": t,
                                      "telemetry": {"temperature_max_c": 60 + 10 * n}} for i, t in enumerate(tflops)]}},
                  "analysis": {"primary_bottleneck": "gpu_thermal" if n == 5 else "gpu_compute", "confidence": 0.7},
                  "remediation": {"priority": "low", "actions": [{"title": "Keep going"}]}}
        collector.add_profile(host, profile_summary(result))
        uuids[host] = [g["uuid"] for g in gpus]
    analysis = analyse(collector.build("t"))["analysis"]
    assert [(s["host"], s["metric"]) for s in analysis["stragglers"]["hosts"]] == [("a10g-2", "memory_triad_gbps")]
    assert [(s["host"], s["uuid"], s["metric"]) for s in analysis["stragglers"]["gpus"]] == [("a10g-4", "GPU-4-1", "bf16_tflops")]
    # temperatures, counts and method names are not performance figures
    assert sorted(analysis["stragglers"]["host_metrics"]) == ["memory_triad_gbps"]
    assert analysis["bottleneck"]["primary"] == "gpu_compute"
    assert [(b["bottleneck"], b["host_count"], b["action"]) for b in analysis["bottleneck"]["by_bottleneck"]] == [
        ("gpu_compute", 5, "Keep going"), ("gpu_thermal", 1, "Keep going")]


# ---------------------------------------------------------------- bottleneck

def test_fleet_bottleneck_is_the_verdict_of_most_hosts_and_actions_rank_by_hosts():
    fleet = SyntheticFleet({"a100x8": 5, "a10gx4": 4})
    verdicts = {"a100x8-00000": "gpu_host_link", "a100x8-00001": "gpu_host_link", "a10gx4-00000": "disk_io",
                "a10gx4-00001": "disk_io", "a10gx4-00002": "disk_io", "a10gx4-00003": "cpu_compute"}
    for host, name in verdicts.items():
        fleet.hosts[host]["profile"]["verdict"] = {"primary_bottleneck": name, "secondary_bottleneck": None, "confidence": 0.5}
    fleet.hosts["a100x8-00004"]["profile"]["verdict"] = {"primary_bottleneck": None}  # no verdict: not counted
    bottleneck = _analysed(fleet)["bottleneck"]
    assert bottleneck["primary"] == "disk_io" and bottleneck["hosts_with_verdict"] == 8
    assert [(g["bottleneck"], g["hosts"]) for g in bottleneck["by_bottleneck"]] == [
        ("disk_io", ["a10gx4-00000", "a10gx4-00001", "a10gx4-00002"]),
        ("gpu_compute", ["a100x8-00002", "a100x8-00003"]),
        ("gpu_host_link", ["a100x8-00000", "a100x8-00001"]),
        ("cpu_compute", ["a10gx4-00003"])]
    assert bottleneck["actions"][0]["action"].startswith("stage the data set on local NVMe")
    assert "PCIe" in [a for a in bottleneck["actions"] if a["bottlenecks"] == ["gpu_host_link"]][0]["action"]
    assert bottleneck["by_class"][A10G]["primary"] == "disk_io" and bottleneck["by_class"][A100]["host_count"] == 2


# ---------------------------------------------------------------- batch plan

def _plan_fleet():
    fleet = SyntheticFleet({"a100x8": 2, "t4x1": 2}, cv=0.0)
    return fleet, dict((h, v["profile"]) for h, v in fleet.hosts.items()), dict((h, "healthy") for h in fleet.hosts)


def test_batch_plan_is_proportional_to_throughput_and_sums_to_the_global_batch():
    fleet, profiles, status = _plan_fleet()
    status["t4x1-00001"] = "failed"
    plan = plan_batches(profiles, status, 1000)
    assert plan["error"] is None and plan["excluded_hosts"] == {"t4x1-00001": "status failed"}
    assert plan["gpus_planned"] == 17
    sizes = [g["batch_size"] for entry in plan["hosts"].values() for g in entry["gpus"]]
    assert sum(sizes) == 1000
    # 280 vs 24 TFLOPS: 1000 * 280 / (16 * 280 + 24) = 62.16 per A100 GPU, 5.33 for the T4. Rounded down that
    # is 997; the 3 left go to A100s (63 / 280 = 0.225 finishes before 6 / 24 = 0.25)
    assert sorted(sizes) == [5] + [62] * 13 + [63] * 3 and plan["hosts"]["t4x1-00000"]["batch_size"] == 5
    # uniform: 58 per GPU, the 14 left to the fastest GPUs (A100s); the T4's 58 set the pace
    uniform_step, planned_step = 58 / 24.0, 63 / 280.0
    assert plan["expected_speedup"] == pytest.approx(uniform_step / planned_step)
    assert plan["expected_step_time_gain"] == pytest.approx(1 - planned_step / uniform_step)


def test_batch_plan_respects_gpu_memory_and_says_when_it_cannot():
    fleet, profiles, status = _plan_fleet()
    # 80 GiB A100 * 0.9 / 2000 MiB = 36 samples; 15 GiB T4 * 0.9 / 2000 = 6
    plan = plan_batches(profiles, status, 500, memory_per_sample_mib=2000)
    gpus = dict(((host, g["index"]), g) for host, entry in plan["hosts"].items() for g in entry["gpus"])
    assert gpus[("a100x8-00000", 0)]["max_batch_size"] == 36 and gpus[("t4x1-00000", 0)]["max_batch_size"] == 6
    assert all(g["batch_size"] <= g["max_batch_size"] for g in gpus.values())
    assert sum(g["batch_size"] for g in gpus.values()) == 500
    assert plan["uniform"]["fits_memory"] is False  # 500 / 18 = 28 > 6 samples on a T4
    assert plan_batches(profiles, status, 1000, memory_per_sample_mib=2000)["error"] == (
        "batch_global_size 1000 does not fit: the planned GPUs hold at most 588 samples of 2000 MiB")
    assert plan_batches(profiles, status, 10)["error"] == "batch_global_size 10 is smaller than the 18 GPUs planned: each needs at least 1 sample"
    assert "does not fit in GPU 0" in plan_batches(profiles, status, 100, memory_per_sample_mib=20000)["error"]


@pytest.mark.parametrize("size, memory, message", [
    (0, None, "batch_global_size: 0 is not a positive integer"), ("8", None, "batch_global_size: '8' is not a positive integer"),
    (64, -1, "batch_memory_per_sample_mib: -1 is not a positive number of MiB")])
def test_bad_batch_settings_are_one_line(size, memory, message):
    with pytest.raises(BatchPlanError) as info:
        plan_batches({}, {}, size, memory)
    assert str(info.value).startswith(message)


def test_env_setup_manifests_drift_per_package_within_the_class():
    fleet = SyntheticFleet({"a10gx4": 4})
    collector = fleet.collector()
    for n, host in enumerate(fleet.names("a10gx4")):
        packages = [{"name": "numpy", "version": "2.1.3"}, {"name": "torch", "version": "2.5.1+cu124"}]
        if n == 2:
            packages[0]["version"] = "1.26.4"
        collector.add_env_setup(host, {"kind": "continuum.hydra.env_manifest", "packages": packages})
    report = analyse(collector.build("t"))
    env_drift = report["analysis"]["env_drift"]
    assert [(i["host"], i["package"], i["version"], i["majority"]) for i in env_drift["drift"]] == [
        (fleet.names("a10gx4")[2], "numpy", "1.26.4", "2.1.3")]
    assert _views.drift_rows(report) == [(fleet.names("a10gx4")[2], A10G, "package numpy", "1.26.4", "2.1.3", "majority", [])]

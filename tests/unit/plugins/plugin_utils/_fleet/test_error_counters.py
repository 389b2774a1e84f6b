"""Peer-relative error counters: each host's gpu.ecc_errors / gpu.pcie_replay is the real check run on its GPUs
(copies of a recording with the counts set), and the fleet analysis compares them with the class."""

import copy
import random

from ansible_collections.continuum.hydra.plugins.module_utils._status import PASS, READ_OK, WARN
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import analyse
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.error_counters import analyse_error_counters
from ansible_collections.continuum.hydra.tests.support import fleet_factory


def _judge(check_id, gpus):
    smi = dict(fleet_factory.recorded_smi("a100-sxm4-v12.xml"), gpus=gpus)
    return fleet_factory.judge(check_id, nvidia_smi={"status": READ_OK, "data": smi, "reason": None, "duration_ms": 0.0})


def _gpus(env, correctable, replays):
    """The host's GPUs as nvidia-smi records (the recording's GPU under each GPU's identity) with the counts set."""
    out = []
    for fact, ecc, replay in zip(env["gpus"], correctable, replays):
        gpu = copy.deepcopy(fleet_factory.recorded_smi("a100-sxm4-v12.xml")["gpus"][0])
        gpu.update(index=fact["index"], uuid=fact["uuid"], pci_bus_id=fact["pci_bus_id"])
        gpu["ecc"]["volatile"]["correctable"] = ecc
        gpu["pcie"]["replay_counter"] = replay
        out.append(gpu)
    return out


def _fleet(outlier_count, hosts=20):
    fleet = fleet_factory.SyntheticFleet({"a100x8": hosts})
    rng = random.Random(7)
    names = fleet.names("a100x8")
    outlier = names[min(11, hosts - 1)]
    for host in names:
        doctor = fleet.hosts[host]["doctor"]
        correctable = [rng.choice((1, 2, 2, 3)) for _unused in range(8)]
        if host == outlier:
            correctable[0] = outlier_count
        gpus = _gpus(doctor["environment"], correctable, [rng.choice((0, 1, 2)) for _unused in range(8)])
        checks = [c for c in doctor["checks"] if c["id"] != "gpu.ecc_errors"]
        doctor["checks"] = checks + [_judge("gpu.ecc_errors", gpus), _judge("gpu.pcie_replay", gpus)]
    return fleet, outlier


def test_a_gpu_counting_50x_its_class_median_is_warn_though_under_the_absolute_threshold():
    fleet, outlier = _fleet(100)  # class median 2; doctor warns over 100
    report = analyse(fleet.report())
    (ecc,) = [c for c in report["hosts"][outlier]["doctor"]["checks"] if c["id"] == "gpu.ecc_errors"]
    assert ecc["status"] == PASS  # under doctor's absolute threshold
    counters = report["analysis"]["error_counters"]
    assert counters["hosts"] == {outlier: WARN}
    (found,) = counters["outliers"]
    uuid = report["hosts"][outlier]["doctor"]["environment"]["gpus"][0]["uuid"]
    assert (found["host"], found["counter"], found["check_id"], found["index"], found["uuid"]) == (
        outlier, "ecc_correctable", "gpu.ecc_errors", 0, uuid)
    assert (found["value"], found["median"], found["ratio"], found["status"]) == (100, 2.0, 50.0, WARN)
    assert found["robust_z"] > 3.5
    assert counters["distributions"]["ecc_correctable"][found["class"]]["n"] == 160
    assert "pcie_replays" in counters["distributions"]  # judged too, no outlier there


def test_ordinary_spread_and_small_counts_are_not_outliers():
    fleet, _outlier = _fleet(3)
    assert analyse(fleet.report())["analysis"]["error_counters"]["outliers"] == []
    fleet, outlier = _fleet(9)  # far above the median, but below min_count
    report = analyse(fleet.report())
    assert report["analysis"]["error_counters"]["outliers"] == []
    relaxed = analyse_error_counters(report["hosts"], dict((h, e["class"]) for h, e in report["hosts"].items()), {"min_count": 5})
    assert relaxed["hosts"] == {outlier: WARN}


def test_a_class_too_small_is_not_judged():
    fleet, _outlier = _fleet(100, hosts=1)
    report = fleet.report()
    counters = analyse_error_counters(report["hosts"], dict((h, "c") for h in report["hosts"]), {"min_peers": 9})
    assert counters["outliers"] == [] and counters["too_few_peers"] == {"c": ["ecc_correctable", "pcie_replays"]}

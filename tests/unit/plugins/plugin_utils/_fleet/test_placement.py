"""GPU placement across the fleet: doctor's gpu.topology judged by the registry on real recorded matrices, the static
profile's placement as profile computes it, through the report's own analysis."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.topology import parse_topology
from ansible_collections.continuum.hydra.plugins.module_utils._profile.static import placement_scores
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, PASS, SKIP, WARN
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import placement
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.profile_summary import profile_summary
from ansible_collections.continuum.hydra.tests.support import fleet_factory
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture
from ansible_collections.continuum.hydra.tests.support.placement_fleet import (
    NUMA3_CPUS,
    dgx_a100,
    fleet_report,
    moved_off_switch,
    placement_errors,
    topology_record,
)


def test_a_gpu_off_its_nics_switch_is_listed_below_the_threshold_with_its_nearest_nic():
    good, bad = topology_record(dgx_a100()), topology_record(moved_off_switch(dgx_a100()))
    assert good["status"] == PASS and bad["status"] == WARN
    report, names = fleet_report([good, good, bad])
    section = report["placement"]
    assert section["kind"] == placement.PLACEMENT_KIND and section["threshold"] == 60.0
    assert section["below"] == [{"host": names[2], "class": report["hosts"][names[2]]["class"], "gpu": "GPU1", "score": 0.0,
                                 "nearest_nic": "mlx5_0", "nic_link": "SYS"}]
    worst = section["hosts"][names[2]]
    assert worst["source"] == "doctor" and worst["lowest"] == 0.0
    assert [g["gpu"] for g in worst["gpus"] if g["below"]] == ["GPU1"]
    # Equal weights, NIC on the GPU's PCIe switch (PXB 0.25) and NUMA node, no CPU facts: 100 * (1 - 0.25 / 2).
    assert section["hosts"][names[0]]["lowest"] == 87.5
    [(klass, summary)] = section["classes"].items()
    assert klass == report["hosts"][names[0]]["class"] and summary == {"hosts": 3, "gpus": 24, "median": 87.5, "lowest": 0.0}
    assert section["unscored"] == []
    assert not placement_errors(report)


def test_a_job_bound_to_one_numa_nodes_cpus_puts_the_remote_gpus_below():
    bound = topology_record(dgx_a100(), bound_cpus=NUMA3_CPUS)
    report, names = fleet_report([bound])
    section = report["placement"]
    # GPU2..7: PXB to their NIC but none of the job's CPUs local: 100 * (1 - (0.25 + 1) / 3) = 58.3.
    assert [(b["gpu"], b["score"]) for b in section["below"]] == [("GPU%d" % i, 58.3) for i in range(2, 8)]
    assert section["hosts"][names[0]]["gpus"][0]["score"] == pytest.approx(91.7)
    # The same host under a threshold of 50: nothing below, the scores unchanged.
    relaxed, _names = fleet_report([bound], threshold=50)
    assert relaxed["placement"]["below"] == [] and relaxed["placement"]["hosts"][names[0]]["lowest"] == 58.3


def test_an_unreadable_topology_is_listed_unscored_and_nothing_to_place_against_is_not():
    error = fleet_factory.check("gpu.topology", ERROR)
    blocked = dict(fleet_factory.check("gpu.topology", SKIP), blocked_by="driver.nvidia_smi")
    no_nic = topology_record(read_fixture("nvidia-smi-topo", "pcie-8gpu-no-nic-gpu-numa-id.txt"))
    assert no_nic["status"] == PASS and {g["placement_score"] for g in no_nic["details"]["gpus"]} == {None}
    lone = fleet_factory.check("gpu.topology", SKIP)
    report, names = fleet_report([topology_record(dgx_a100()), error, blocked, no_nic, lone, None])
    section = report["placement"]
    assert sorted(section["hosts"]) == [names[0]]
    assert section["unscored"] == [{"host": names[1], "reason": "gpu.topology ERROR: gpu.topology: ERROR"},
                                   {"host": names[2], "reason": "gpu.topology SKIP: gpu.topology: SKIP"}]
    assert not placement_errors(report)


def test_no_score_anywhere_means_no_section():
    report, _names = fleet_report([None, None])
    assert "placement" not in report


def test_the_static_profiles_placement_is_read_when_doctor_gave_none(tmp_path):
    topology = parse_topology(moved_off_switch(dgx_a100(), "GPU6"))
    # profile's own scoring, /sys read under an empty root (no NUMA or CPU facts there)
    topology["placement"] = placement_scores(topology, {"expect": {}}, str(tmp_path))
    result = fleet_factory.profile_result(fleet_factory.recorded_smi("a100-sxm4-v12.xml")["gpus"][:1])
    result["static_profile"]["gpu_topology"] = topology
    summary = profile_summary(result)
    assert summary["placement"]["GPU6"] == {"score": 0.0, "nearest_nic": "mlx5_0", "nic_link": "SYS"}
    report, names = fleet_report([None], profiles={0: summary})
    entry = report["placement"]["hosts"][names[0]]
    assert entry["source"] == "profile" and entry["lowest"] == 0.0
    assert not placement_errors(report)
    assert [(b["gpu"], b["nearest_nic"]) for b in report["placement"]["below"]] == [("GPU6", "mlx5_0")]
    # doctor's score wins over the profile's when both are there
    report, names = fleet_report([topology_record(dgx_a100())], profiles={0: summary})
    assert report["placement"]["hosts"][names[0]]["source"] == "doctor" and report["placement"]["below"] == []


@pytest.mark.parametrize("value", ["sixty", -1, 100.5, "nan", True, None])
def test_a_bad_threshold_is_one_line_naming_it(value):
    with pytest.raises(placement.PlacementSettingError) as caught:
        placement.threshold_value(value)
    assert str(caught.value) == "placement_threshold: %r is not a score from 0 to 100" % (value,)


@pytest.mark.parametrize("value,expected", [("75", 75.0), (0, 0.0), (100, 100.0), (60.5, 60.5)])
def test_a_threshold_is_a_score(value, expected):
    assert placement.threshold_value(value) == expected

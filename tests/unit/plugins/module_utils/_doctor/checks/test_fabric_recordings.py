"""gpu.fabric_state on real `nvidia-smi -q -x` recordings of GB200, GB300, HGX H100 and HGX B200 nodes
(tests/fixtures/k8s-test-infra/README.md), with faults planted in copies: the values real nodes reported in public
issue threads (named at each test)."""

import re

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvidia_smi
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, PASS, SKIP, WARN
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import interconnect as fleet_interconnect
from ansible_collections.continuum.hydra.tests.support import interconnect as ic
from ansible_collections.continuum.hydra.tests.support.envelopes import ok
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

CLUSTER = "00000001-0000-0000-0000-000000000001"   # the recordings' scrubbed cluster UUID (README)
ZERO = "00000000-0000-0000-0000-000000000000"


def _recording(name):
    return read_fixture("k8s-test-infra", name)


def _judge(xml, expect=None, nvswitches=None):
    envelopes = {"nvidia_smi": ok(parse_nvidia_smi(xml))}
    if nvswitches is not None:
        envelopes["nvidia_pci"] = ok({"gpus": [], "nvswitches": nvswitches})
    return ic.judge("gpu.fabric_state", expect, **envelopes)


def _planted(xml, gpu, drop=(), **values):
    """The recording with its gpu-th <gpu>'s <fabric> elements set to values (element -> text), drop removed."""
    head, *blocks = re.split(r"(?=\t<gpu id=)", xml)
    before, fabric, after = re.match(r"(?s)(.*?)(<fabric>.*?</fabric>)(.*)", blocks[gpu]).groups()
    for element, text in values.items():
        fabric, n = re.subn(r"(<%s>)[^<]*(</%s>)" % (element, element), r"\g<1>%s\g<2>" % text, fabric)
        assert n == 1, "planting failed: %s" % element
    for element in drop:
        fabric, n = re.subn(r"\s*<%s>[^<]*</%s>" % (element, element), "", fabric)
        assert n == 1, "dropping failed: %s" % element
    blocks[gpu] = before + fabric + after
    return head + "".join(blocks)


HEALTHY = {"route_recovery": False, "route_unhealthy": False, "access_timeout_recovery": False}
UNREPORTED = {"health_summary": None, "bandwidth": None, "route_recovery": None, "route_unhealthy": None,
              "access_timeout_recovery": None, "incorrect_configuration": None}


GB200 = dict(HEALTHY, state="Completed", status="Success", clique_id=2, cluster_uuid=CLUSTER, health_summary="Healthy",
             bandwidth="Full", incorrect_configuration=None)
GB300 = dict(GB200, clique_id=32766, incorrect_configuration="None")
HGX = dict(UNREPORTED, state="Completed", status="Success", clique_id=0, cluster_uuid=ZERO)


@pytest.mark.parametrize("name, gpus, driver, fabric", [
    ("qx-gb200.xml", 4, "580.173.02", GB200),
    ("qx-gb300.xml", 4, "580.173.02", GB300),
    ("qx-h100.xml", 2, "580.105.08", HGX),
    ("qx-b200.xml", 2, "580.105.08", dict(HGX, health_summary="Healthy", access_timeout_recovery=False)),
])
def test_the_parser_reads_every_recorded_fabric_element(name, gpus, driver, fabric):
    smi = parse_nvidia_smi(_recording(name))
    assert smi["driver_version"] == driver and len(smi["gpus"]) == gpus
    assert [g["fabric"] for g in smi["gpus"]] == [fabric] * gpus
    assert [g["unreadable"] for g in smi["gpus"]] == [{}] * gpus


def test_recorded_gb200_and_gb300_trays_pass_naming_their_cluster_and_clique():
    gb200 = _judge(_recording("qx-gb200.xml"), {"nvlink_domain": "rack-1"})
    assert (gb200["status"], gb200["message"]) == (
        PASS, "4 GPU(s) on the NVLink fabric: cluster %s, clique 2, NVLink domain rack-1" % CLUSTER)
    assert [g["clique_id"] for g in gb200["details"]["gpus"]] == [2] * 4
    gb300 = _judge(_recording("qx-gb300.xml"))   # incorrect_configuration "None": no fault
    assert (gb300["status"], gb300["message"]) == (PASS, "4 GPU(s) on the NVLink fabric: cluster %s, clique 32766" % CLUSTER)


@pytest.mark.parametrize("name", ["qx-h100.xml", "qx-b200.xml"])
def test_recorded_hgx_nodes_are_not_read_as_a_multi_node_fabric(name):
    # HGX GPUs report Completed/Success with clique 0 and an all-zero cluster UUID: one node's NVSwitches, no NVLink
    # domain. Before the fix, without the PCI reading the check passed them as "on the NVLink fabric: cluster 00000000-...".
    xml = _recording(name)
    assert _judge(xml, nvswitches=["0000:05:00.0"])["message"] == "an NVSwitch host: gpu.fabric_manager judges its GPUs' fabric state"
    alone = _judge(xml)
    assert (alone["status"], alone["message"]) == (
        SKIP, "2 GPU(s) on a single-node NVLink fabric (cluster UUID %s): not a multi-node NVLink system" % ZERO)
    claimed = _judge(xml, {"nvlink_domain": "rack-1"})
    assert (claimed["status"], claimed["message"]) == (
        FAIL, "2 GPU(s) in no NVLink domain (cluster UUID %s, clique 0) on a host of NVLink domain rack-1: GPU 0, 1" % ZERO)


def test_a_failed_registration_status_fails_instead_of_reading_as_unreadable():
    # Values of a real node (Azure/azhpc-images#506, node miv50-vin1-1g03-30, model not named): state Completed, status
    # Insufficient Resources, clique 0, an all-zero cluster UUID (NVIDIA/NVSentinel#883 shows Unknown Error there too).
    # Both are NVML error strings, so before the fix the parser filed the status under unreadable and the check
    # warned of a split clique instead.
    xml = _planted(_recording("qx-gb200.xml"), 1, status="Insufficient Resources", cliqueId="0", clusterUuid=ZERO)
    gpu = parse_nvidia_smi(xml)["gpus"][1]
    assert gpu["fabric"]["status"] == "Insufficient Resources" and gpu["unreadable"] == {}
    record = _judge(xml)
    assert (record["status"], record["message"]) == (
        FAIL, "1 GPU(s) not on the NVLink fabric: GPU 1 state Completed, status Insufficient Resources")
    unknown = _judge(_planted(_recording("qx-gb300.xml"), 0, status="Unknown Error"))
    assert (unknown["status"], unknown["message"]) == (FAIL, "1 GPU(s) not on the NVLink fabric: GPU 0 state Completed, status Unknown Error")


def test_a_gpu_still_registering_fails():
    # Values of a real node (NVIDIA/gpu-operator#2511, driver 580.159.04): In Progress, everything else N/A.
    xml = _planted(_recording("qx-gb300.xml"), 3, state="In Progress", status="N/A", cliqueId="N/A", clusterUuid="N/A",
                   summary="N/A", bandwidth="N/A", route_recovery_in_progress="N/A", route_unhealthy="N/A",
                   access_timeout_recovery="N/A", incorrect_configuration="N/A", partition_assigned="N/A")
    record = _judge(xml)
    assert (record["status"], record["message"]) == (FAIL, "1 GPU(s) not on the NVLink fabric: GPU 3 state In Progress, status None")


def test_an_unhealthy_summary_warns():
    # Values of a real node (kubernetes-sigs/dra-driver-nvidia-gpu#626): Completed, Success, Summary Unhealthy, Bandwidth Full.
    record = _judge(_planted(_recording("qx-gb200.xml"), 0, summary="Unhealthy"))
    assert (record["status"], record["message"]) == (WARN, "fabric health of 1 GPU(s): GPU 0 Unhealthy, bandwidth Full")


def test_a_route_condition_warns_where_the_driver_writes_no_summary():
    # Driver 570.124.06 writes Bandwidth and the three conditions but no Summary (thamada/gls RTX5090_smi.py), so a
    # condition is the only sign there. Before the fix the conditions were not read and this passed.
    xml = _planted(_recording("qx-gb200.xml"), 2, drop=("summary", "incorrect_configuration", "partition_assigned"),
                   route_unhealthy="True")
    record = _judge(xml)
    assert (record["status"], record["message"]) == (WARN, "fabric health of 1 GPU(s): GPU 2 no summary, bandwidth Full, route unhealthy")
    assert record["details"]["gpus"][0]["faults"] == ["no summary, bandwidth Full", "route unhealthy"]


def test_a_gb300_tray_in_a_gb200_rack_group_is_named_by_the_fleet():
    hosts = {}
    for host, name in (("tray-1", "qx-gb200.xml"), ("tray-2", "qx-gb200.xml"), ("tray-3", "qx-gb300.xml")):
        record = _judge(_recording(name), {"nvlink_domain": "rack-1"})
        assert record["status"] == PASS
        hosts[host] = {"doctor": {"checks": [dict(record, id="gpu.fabric_state")]}}
    off, groups = fleet_interconnect._nvlink_domains(hosts)
    assert [(o["host"], o["seen"], o["expected_clique_id"], o["peers"]) for o in off] == [
        ("tray-3", "cluster %s clique 32766" % CLUSTER, "2", ["tray-1", "tray-2"])]
    assert groups == [{"domain": "rack-1", "cluster_uuid": CLUSTER, "clique_id": "2", "hosts": 3, "agreeing": 2}]


@pytest.mark.parametrize("planted, fault", [
    ({"summary": "Unhealthy"}, "GPU 1 Unhealthy, bandwidth N/A"),
    ({"access_timeout_recovery": "True"}, "GPU 1 Healthy, bandwidth N/A, access timeout recovery"),
])
def test_an_hgx_gpus_fabric_health_fault_warns_instead_of_the_single_node_skip(planted, fault):
    # The B200 recording reports a health block beside its all-zero cluster UUID: a fault there is the GPU's own
    # report, not hidden by "not a multi-node NVLink system".
    record = _judge(_planted(_recording("qx-b200.xml"), 1, **planted))
    assert (record["status"], record["message"]) == (WARN, "fabric health of 1 GPU(s): %s" % fault)


@pytest.mark.parametrize("element, label", [("route_recovery_in_progress", "route recovery in progress"),
                                            ("route_unhealthy", "route unhealthy"),
                                            ("access_timeout_recovery", "access timeout recovery")])
def test_each_fabric_condition_that_holds_warns_beside_a_healthy_summary(element, label):
    record = _judge(_planted(_recording("qx-gb300.xml"), 2, **{element: "True"}))
    assert (record["status"], record["message"]) == (WARN, "fabric health of 1 GPU(s): GPU 2 Healthy, bandwidth Full, %s" % label)


def test_a_configuration_fault_warns():
    # Any value but None: NVML's incorrect-configuration field (nvmlGpuFabricInfo_v2 health mask) names the fault.
    record = _judge(_planted(_recording("qx-gb300.xml"), 0, incorrect_configuration="Incorrect Sysguid"))
    assert record["status"] == WARN and record["details"]["gpus"][0]["faults"] == [
        "Healthy, bandwidth Full", "incorrect configuration Incorrect Sysguid"]


def test_a_host_whose_gpus_are_partly_outside_any_nvlink_domain_warns_of_the_split():
    record = _judge(_planted(_recording("qx-gb200.xml"), 1, cliqueId="0", clusterUuid=ZERO))
    assert (record["status"], record["message"]) == (
        WARN, "the host's GPUs disagree: cluster UUID %s / %s, clique 0 / 2" % (ZERO, CLUSTER))

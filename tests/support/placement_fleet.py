"""Fleets with GPU placement scores: doctor's gpu.topology judged by the registry on real recorded matrices
(tests/fixtures/nvidia-smi-topo), added to fleet_factory's hosts, analysed by the report's own analysis."""

import copy

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.topology import parse_topology
from ansible_collections.continuum.hydra.plugins.module_utils._status import READ_OK
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import placement
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse
from ansible_collections.continuum.hydra.tests.support import fleet_factory
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import schema_validator

DGX_A100 = "oyanghd-8x-a100-sxm4-40gb-epyc7742-nps4-10nic.txt"
# The job bound to the CPUs of GPU0/GPU1's NUMA node (NPS4 EPYC 7742): the other six GPUs are remote to it.
NUMA3_CPUS = "48-63,176-191"


def dgx_a100():
    return read_fixture("nvidia-smi-topo", DGX_A100)


def moved_off_switch(text, gpu="GPU1"):
    """The matrix with ``gpu`` moved off its NICs' PCIe switch: every NIC at SYS from it."""
    lines = text.splitlines()
    header = lines[0].split("\t")
    nics = [c for c in header if c.startswith("NIC")]
    out = []
    for line in lines:
        cells = line.split("\t")
        if cells[0] == gpu:
            cells = [("SYS" if header[i] in nics else c) if i < len(header) else c for i, c in enumerate(cells)]
        elif cells[0] in nics and gpu in header:
            cells[header.index(gpu)] = "SYS"
        out.append("\t".join(cells))
    return "\n".join(out) + "\n"


def topology_record(text, **facts):
    """gpu.topology as the registry judges it on this matrix and these /sys facts."""
    sys_facts = {"gpus": {}, "nics": {}, "numa_nodes": None, "sockets": None, "bound_cpus": None}
    sys_facts.update(facts)
    envelope = {"status": READ_OK, "data": {"topology": parse_topology(text), "sys": sys_facts}, "reason": None, "duration_ms": 1.0}
    return fleet_factory.judge("gpu.topology", topology=envelope)


def placement_errors(report):
    """Schema errors in the placement section and the profiles' placement (the rest is other tests' business)."""
    return [e for e in schema_validator().iter_errors(report)
            if list(e.absolute_path)[:1] == ["placement"] or "placement" in list(e.absolute_path)]


def fleet_report(records, threshold=placement.DEFAULT_THRESHOLD, profiles=None):
    """An a100x8 fleet (fleet_factory), one host per record: the record added to the host's doctor checks."""
    fleet = fleet_factory.SyntheticFleet({"a100x8": len(records)})
    for host, record in zip(fleet.names("a100x8"), records):
        if record is not None:
            doctor = fleet.hosts[host]["doctor"]
            doctor["checks"] = doctor["checks"] + [copy.deepcopy(record)]
    collector = fleet.collector()
    for host, summary in (profiles or {}).items():
        collector.add_profile(fleet.names("a100x8")[host], summary)
    report = collector.build("2026-11-24T13:00:00+00:00", "doctor.yml")
    return analyse(report, AnalysisOptions(placement_threshold=threshold)), fleet.names("a100x8")

"""A whole doctor result for each class of the synthetic fleet, as a real GPU host of that class returns it.

doctor's own run() at its default level (standard), every probe fed from recordings through the collection's own
readers and parsers: the class's recorded `nvidia-smi -q -x` (tests/fixtures/nvidia-smi) with the host's GPU
count, `nvidia-smi topo -m` of a machine with that many GPUs, `nvidia-smi nvlink --status` and `nvlink -e` per
GPU where the class has NVLink, GPUd's InfiniBand tree (state and counters), procfs' AER files for every GPU, the
recorded Debian host tree (host facts, cgroups, NUMA, EDAC), its chronyc, nvcc and torch outputs (the torch output
edited into what a CUDA wheel reports on these GPUs, as tests/unit/.../test_stack.py does) and a clean kernel log.
So every check carries the details a real host's does (per-GPU clocks, power, ECC counters, PCIe links, NVLink
and InfiniBand counters, placement scores...), which is what the fleet report's analysis, findings, evidence and
history read and keep.

``template(class_name)`` is that result as JSON text with placeholders for each GPU's identity; ``host_result()``
makes one host's result from it (its own GPU UUIDs, serials and addresses) with ``json.loads``, the way ansible-core
hands the callback a module's result: every host's objects its own, nothing shared between hosts.
"""

import copy
import json
import os
import random
import re
import tempfile

from ansible_collections.continuum.hydra.plugins.module_utils import _results
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue as probe_catalogue
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import host as host_probe
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import interconnect as interconnect_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import system as system_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import xid
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvlink_status
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvlink_errors import parse_nvlink_errors
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.topology import parse_topology
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLines
from ansible_collections.continuum.hydra.plugins.module_utils._host.pcie_aer import read_aer
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, SKIP, WARN, host_verdict
from ansible_collections.continuum.hydra.tests.support import fleet_factory
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture
from ansible_collections.continuum.hydra.tests.support.host_tree import copy_host_tree, lay_out_dump, recorded_statvfs

HOST = "debian12-vm"
# `nvidia-smi topo -m` of a machine with the class's GPU count (the matrix's GPU names are the class's indices).
TOPOLOGY = {8: "oyanghd-8x-a100-sxm4-40gb-epyc7742-nps4-10nic.txt", 4: "stelline-asus-esc8000a-e12-4x-rtx6000ada-2socket-4nic.txt",
            2: "stelline-puget-wrx90-2x-rtx6000ada-2nic.txt", 1: "traverse-v100-1gpu-slurm-job.txt"}
NVLINK_CLASSES = ("a100x8",)  # SXM boards: NVLink state and error counters per GPU
READ_AT = 1_800_000_000.0
# Placeholders of the template's GPU identities: "@@<kind><index>@@", replaced per host (a GPU's PCI address is
# fleet_factory's, the same on every host: 00000000:10:00.0 for GPU 0, 00000000:20:00.0 for GPU 1...).
_PLACEHOLDER = re.compile(r"@@(uuid|serial)(\d+)@@")

_TEMPLATES = {}


def _placeholder(kind, index):
    return "@@%s%d@@" % (kind, index)


def _pci(index):
    return "00000000:%02X:00.0" % (0x10 + index * 0x10)


def _gpus(class_name):
    """The class's GPUs: the recording's first GPU once per index, healthy as a fleet's GPUs mostly are (persistence
    mode on, the PCIe link at its full width), each with placeholders for its identity."""
    fixture, count = fleet_factory.CLASSES[class_name][:2]
    first = copy.deepcopy(fleet_factory.recorded_smi(fixture)["gpus"][0])
    first["persistence_mode"] = "Enabled"
    first["pcie"]["width_current"] = first["pcie"]["width_max"]
    return [dict(copy.deepcopy(first), index=i, uuid=_placeholder("uuid", i), serial=_placeholder("serial", i),
                 pci_bus_id=_pci(i)) for i in range(count)]


def _ok(data):
    return lambda options: data


def _absent(reason):
    def probe(options):
        raise ProbeAbsent(reason)
    return probe


def _torch(gpus, cuda):
    """The recorded torch probe output edited into what a wheel built for the driver's CUDA reports on these GPUs."""
    data = json.loads(read_fixture("hosts", HOST, "cmd", "torch-probe.json"))
    data.update({"version": "2.5.1+cu%s" % cuda.replace(".", ""), "cuda_build": cuda, "cudnn_version": 90100, "cuda_available": True,
                 "device_count": len(gpus), "nccl_available": True, "nccl_version": "2.21.5",
                 "devices": [{"index": g["index"], "name": g["name"], "capability": "8.0",
                              "total_memory_bytes": (g.get("memory") or {}).get("total_mib", 16384) * 2 ** 20,
                              "multi_processor_count": 108, "uuid": g["uuid"], "pci_bus_id": g["pci_bus_id"]} for g in gpus]})
    data.pop("nccl_error", None)
    return data


def _nvlink(gpus):
    """`nvidia-smi nvlink --status` and `nvlink -e` recordings, their GPU 0 given to each of these GPUs."""
    status_gpu = parse_nvlink_status(read_fixture("nvidia-smi-nvlink", "a100-sxm4-40gb-status.txt"))[0]
    bad = BadLines()
    errors_gpu = parse_nvlink_errors(read_fixture("ml-engineering", "nvidia-smi-nvlink-e-h100.txt"), bad)[0]
    status = [dict(copy.deepcopy(status_gpu), index=g["index"], uuid=g["uuid"], name=g["name"]) for g in gpus]
    errors = [dict(copy.deepcopy(errors_gpu), index=g["index"], uuid=g["uuid"], name=g["name"]) for g in gpus]
    return ({"source": "nvidia-smi", "gpus": status, "bad_lines": {}},
            {"source": "nvidia-smi", "read_at": READ_AT, "gpus": errors, "bad_lines": bad.as_dict()})


def _aer(root, gpus):
    """procfs' recorded AER files for every GPU's address, read by the real reader."""
    functions = []
    for gpu in gpus:
        address = _pci(gpu["index"]).lower()[4:]
        directory = os.path.join(root, "sys/bus/pci/devices", address)
        os.makedirs(directory, exist_ok=True)
        for name in ("aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal"):
            with open(os.path.join(directory, name), "w") as handle:
                handle.write(read_fixture("procfs", "aer-01.00.0", name))
        functions.append({"address": address, "kind": "gpu", "name": None})
    data = read_aer(os.path.join(root, "sys/bus/pci/devices"), functions, 10)
    data["read_at"] = READ_AT
    for device, gpu in zip(data["devices"], gpus):
        device["address"] = gpu["pci_bus_id"]
    return data


def _probe_table(class_name, root):
    gpus = _gpus(class_name)
    smi = dict(fleet_factory.recorded_smi(fleet_factory.CLASSES[class_name][0]), gpus=gpus)
    copy_host_tree(root)
    lay_out_dump(root, "gpud/sys-class-infiniband-h100.txt")
    lay_out_dump(root, "edac/ie31200-alder-lake-2025.txt")
    _clear_saturated(root)
    options = {"timeouts": {"command": 10}}
    table = dict((name, _absent("not on this host")) for name in probe_catalogue.PROBES)
    ib_counters = interconnect_probes.probe_ib_counters(options, root=str(root))
    ib_counters["read_at"] = READ_AT
    table.update({
        "host": _ok(host_probe.probe_host({}, root=str(root), environ={})),
        "nvidia_smi": _ok(smi),
        "nvml": _absent("pynvml (nvidia-ml-py) is not installed"),
        "kernel_log": _ok(dict(xid.scan(""), source="journalctl", journal_problem=None, window_hours=24, window_applied=True)),
        "torch": _ok(_torch(gpus, smi["cuda_version"])),
        # PyTorch wheels bring their own CUDA runtime: no toolkit on the host.
        "nvcc": _absent("no CUDA toolkit: nvcc is not on PATH nor in /usr/local/cuda/bin (not needed for PyTorch wheels)"),
        "edac": _ok(system_probes.probe_edac(options, root=str(root))),
        "cgroups": _ok(system_probes.probe_cgroups(options, root=str(root))),
        "numa": _ok(system_probes.probe_numa(options, root=str(root))),
        "time_sync": _ok(dict(system_probes.parse_chronyc_tracking(
            read_fixture("hosts", HOST, "cmd", "chronyc-tracking-local-stratum10.txt")), source="chronyc", tried={})),
        "infiniband": _ok(system_probes.probe_infiniband(options, root=str(root))),
        "ib_counters": _ok(ib_counters),
        "pcie_aer": _ok(_aer(str(root), gpus)),
        "topology": _ok({"topology": parse_topology(read_fixture("nvidia-smi-topo", TOPOLOGY[len(gpus)])),
                         "sys": {"gpus": {}, "nics": {}, "numa_nodes": None, "sockets": None, "bound_cpus": None}}),
    })
    # /dev/shm and the disks as statvfs read them on the recorded host (the default disk paths, / and /tmp, on one disk).
    shm = recorded_statvfs("statvfs-dev-shm.json")
    disk = recorded_statvfs("statvfs-root.json")
    table["dev_shm"] = _ok(system_probes.probe_dev_shm(options, statvfs=lambda path: shm))
    table["disk_space"] = _ok(system_probes.probe_disk_space(dict(options, disk_paths=None), statvfs=lambda path: disk))
    if class_name in NVLINK_CLASSES:
        status, errors = _nvlink(gpus)
        table.update(nvlink=_ok(status), nvlink_errors=_ok(errors))
    return table


def _clear_saturated(root):
    """The recorded InfiniBand counters that sit at their width's maximum (4- and 8-bit counters of a port that has
    seen trouble) set back to zero: a port as most of a fleet's are."""
    for path in root.glob("sys/class/infiniband/*/ports/*/counters/*"):
        if path.read_text().strip() in ("15", "255") and path.name in ("link_downed", "excessive_buffer_overrun_errors",
                                                                       "local_link_integrity_errors", "link_error_recovery"):
            path.write_text("0\n")


def template(class_name):
    """The class's whole doctor checks as JSON text, GPU identities as placeholders (cached)."""
    if class_name not in _TEMPLATES:
        with tempfile.TemporaryDirectory(prefix="hydra-whole-host-") as root:
            from pathlib import Path  # pylint: disable=import-outside-toplevel
            result = _doctor.run(probes=_probe_table(class_name, Path(root)), deterministic=True, persist=False)
        _TEMPLATES[class_name] = json.dumps({"checks": result["checks"], "probes": result["probes"]})
    return _TEMPLATES[class_name]


def host_checks(class_name, gpus):
    """The class's checks and probe envelopes with these GPUs' identities (GPU records of the host's environment),
    every object new."""
    identity = {}
    for gpu in gpus:
        identity[_placeholder("uuid", gpu["index"])] = gpu["uuid"]
        identity[_placeholder("serial", gpu["index"])] = gpu.get("serial") or ""
    return json.loads(_PLACEHOLDER.sub(lambda m: identity[m.group(0)], template(class_name)))


def plant_statuses(rng, checks):
    """~1 % FAIL, 4 % WARN, 10 % SKIP of the checks a real run judged (a deterministic draw of rng), the rest as
    judged. A check that reads each GPU then names the host's first GPU alone, as a real one names only the GPUs it
    found at fault (its reading of that GPU kept). Returns the checks."""
    for chk in checks:
        roll = rng.random()
        if roll < 0.05:
            chk["status"] = FAIL if roll < 0.01 else WARN
            chk["message"] = "%s: %s on GPU 0" % (chk["id"], chk["status"])
            chk["remediation"] = "fix %s" % chk["id"]
            details = chk.get("details")
            if isinstance(details, dict) and isinstance(details.get("gpus"), list):
                details["gpus"] = [g for g in details["gpus"] if isinstance(g, dict) and g.get("index") == 0][:1]
        elif roll < 0.15 and chk["status"] not in (ERROR, FAIL):
            chk["status"] = SKIP
    return checks


def host_result(rng, class_name, env):
    """One host's whole doctor result: the class's checks with its GPUs, statuses planted, summary recounted."""
    env["timestamp_utc"] = "2026-11-26T12:00:00+00:00"  # when doctor ran: the same in every run of a benchmark
    whole = host_checks(class_name, env["gpus"])
    checks = plant_statuses(rng, whole["checks"])
    summary = _results.summarize(checks)
    return {"schema_version": _results.SCHEMA_VERSION, "level": "standard", "environment": env, "checks": checks,
            "summary": summary, "overall_status": host_verdict(summary),
            "probes": whole["probes"]}


# The synthetic fleet's class shares (benchmarks/fleet_analysis.py and the controller benchmarks beside it).
SHARES = {"a100x8": 0.4, "a10gx4": 0.3, "t4x1": 0.2, "ada4000x2": 0.1}


def whole_fleet(n, seed, cv=0.02):
    """fleet_factory's SyntheticFleet of ``n`` hosts in the four classes, each host's doctor result a whole one
    (host_result: the class's real checks, ~5 % of them planted FAIL or WARN), 1 % of hosts slowed by 15-30 %."""
    sizes = dict((name, int(round(n * share))) for name, share in SHARES.items())
    fleet = fleet_factory.SyntheticFleet(sizes, seed=seed, cv=cv)
    rng = random.Random(seed)
    for name in sorted(fleet.hosts):
        record = fleet.hosts[name]
        record["doctor"] = host_result(rng, record["class"], record["doctor"]["environment"])
    for host in rng.sample(sorted(fleet.hosts), max(1, n // 100)):
        fleet.slow_host(host, rng.uniform(0.7, 0.85), "triad_gbps")
    return fleet

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU / NIC / CPU topology: ``nvidia-smi topo -m`` and ``rocm-smi --showtopo`` parsed into one shape, read with a deadline.

Both parsers return the same dict (``parse_topology`` / ``parse_rocm_showtopo``)::

    devices        every row name, matrix order (GPU0.., then NICs: NIC0.. or old mlx5_N headers)
    gpus / nics    the same names split by kind
    links          name -> {peer: kind}; kinds as nvidia-smi writes them (NV#, PIX, PXB, PHB, NODE, SYS),
                   SOC (drivers before ~2018) read as SYS; AMD: XGMI or PCIE
    nvlinks        GPU -> {peer GPU: bonded NVLink count} from NV# cells
    cpu_affinity   GPU -> cpulist as printed ("" when the cell is empty)
    numa_affinity  GPU -> NUMA affinity as printed ("N/A" when nvidia-smi hides it)
    gpu_numa_id    GPU -> "GPU NUMA ID" cell (driver 545+; N/A on x86, a node id on Grace Hopper)
    nic_names      NIC# -> RDMA device name from the "NIC Legend" (mlx5_0); old headers name themselves
    weights, hops  AMD only: GPU -> {peer: int}
    source         "nvidia-smi" or "rocm-smi"
    problems       lines that could not be read (a row whose cell count does not match the header)

Cells are split on tabs when a line has them, else on runs of spaces (pasted copies); an empty affinity cell
and nvidia-smi's padding tab before "N/A" are told apart by the number of labels in the header.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import re
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host import command as _command
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text_or_none
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import rdma_devices, read_locality, scan_nvidia_functions

# The labels after the matrix columns, in the order nvidia-smi prints them.
LABELS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_LABEL_KEYS = {"CPU Affinity": "cpu_affinity", "NUMA Affinity": "numa_affinity", "GPU NUMA ID": "gpu_numa_id"}
# PCIe / interconnect path kinds, nearest first (nvidia-smi's legend); NV# is nearer than all of them.
PCIE_KINDS = ("PIX", "PXB", "PHB", "NODE", "SYS")
# Closeness rank of a link kind: lower is nearer. Unknown kinds rank past SYS.
_RANK = {"X": 0, "NV": 1, "XGMI": 1, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 6, "PCIE": 6}
UNKNOWN_RANK = 7
# A bonded-link count has a few digits (NV18 on H100); a longer one is not a link kind (named in problems).
_NV = re.compile(r"^NV(\d{1,3})$")
_GPU = re.compile(r"^GPU\d+$")
_LEGEND_NIC = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


def link_rank(kind: Optional[str]) -> int:
    """How near a link kind is (0 self, 1 NVLink/XGMI, 2 PIX .. 6 SYS); unknown kinds UNKNOWN_RANK."""
    if not kind:
        return UNKNOWN_RANK
    if _NV.match(kind):
        return _RANK["NV"]
    return _RANK.get(kind, UNKNOWN_RANK)


def nvlink_count(kind: Optional[str]) -> Optional[int]:
    """Bonded NVLinks in an ``NV#`` cell, else None."""
    match = _NV.match(kind or "")
    return int(match.group(1)) if match else None


def _cells(line: str) -> list[str]:
    if "\t" in line:
        return [cell.strip() for cell in line.split("\t")]
    return line.split()


def _kind(cell: str) -> str:
    cell = cell.strip()
    return "SYS" if cell == "SOC" else cell


def _empty(source: str) -> dict[str, Any]:
    return {"devices": [], "gpus": [], "nics": [], "links": {}, "nvlinks": {}, "cpu_affinity": {}, "numa_affinity": {},
            "gpu_numa_id": {}, "nic_names": {}, "source": source, "problems": []}


def _header(lines: list[str]) -> tuple[int, list[str], list[str]]:
    """(index of the header line, device columns, affinity labels present) or (-1, [], [])."""
    for index, line in enumerate(lines):
        tokens = line.split()
        if "GPU0" not in tokens or (tokens and tokens[0] == "GPU0" and tokens[1:2] == ["X"]):
            continue
        labels = [label for label in LABELS if label in line]
        text = line
        for label in labels:
            text = text.replace(label, " ")
        return index, text.split(), labels
    return -1, [], []


def _tail(cells: list[str], count: int) -> list[str]:
    """The affinity cells of a row: padding empties (never the first, which may be a real empty cpulist) dropped."""
    while cells and not cells[-1]:
        cells = cells[:-1]
    cells = list(cells)
    index = len(cells) - 1
    while len(cells) > count and index >= 1:
        if not cells[index]:
            del cells[index]
        index -= 1
    return cells[:count] + [""] * (count - len(cells))


def parse_topology(text: Optional[str]) -> Optional[dict[str, Any]]:
    """``nvidia-smi topo -m`` (any driver generation, tabs or spaces) -> the topology dict; None when empty/not a matrix."""
    lines = [line.rstrip("\r\n") for line in (text or "").splitlines()]
    start, columns, labels = _header(lines)
    if start < 0 or not columns:
        return None
    topology = _empty("nvidia-smi")
    known = set(columns)
    for line in lines[start + 1:]:
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("Legend"):
            break
        cells = _cells(line)
        if "\t" in line and cells and cells[0] == "":
            cells = cells[1:]
        name = cells[0] if cells else ""
        if name not in known:
            continue
        values = cells[1:]
        matrix = [_kind(cell) for cell in values[:len(columns)]]
        if len(matrix) < len(columns) or any(not cell for cell in matrix):
            topology["problems"].append("row %s: %d matrix cells for %d columns" % (name, len([c for c in matrix if c]), len(columns)))
        topology["devices"].append(name)
        topology["gpus" if _GPU.match(name) else "nics"].append(name)
        topology["links"][name] = dict((peer, kind) for peer, kind in zip(columns, matrix) if kind and kind != "X" and peer != name)
        nvlinks = dict((peer, nvlink_count(kind)) for peer, kind in topology["links"][name].items() if nvlink_count(kind) is not None)
        unknown = sorted(set(kind for kind in matrix if kind and kind != "X" and link_rank(kind) == UNKNOWN_RANK))
        if unknown:
            topology["problems"].append("row %s: %s not a link kind (X, NV#, %s)" % (
                name, ", ".join(repr(kind) for kind in unknown), ", ".join(PCIE_KINDS)))
        extra = [cell for cell in values[len(columns):] if link_rank(_kind(cell)) < UNKNOWN_RANK]
        if extra:
            topology["problems"].append("row %s: %d more link cells than the header has columns (a damaged copy?)" % (name, len(extra)))
        if _GPU.match(name):
            topology["nvlinks"][name] = nvlinks
            for label, value in zip(labels, _tail(values[len(columns):], len(labels))):
                topology[_LABEL_KEYS[label]][name] = value
    for line in lines:
        match = _LEGEND_NIC.match(line)
        if match:
            topology["nic_names"][match.group(1)] = match.group(2)
    if not topology["devices"]:
        return None
    lost = [column for column in columns if _GPU.match(column) and column not in topology["devices"]]
    if lost:
        topology["problems"].append("%s: in the header, no row (output cut?)" % ", ".join(lost))
    return topology


def rdma_name(topology: Mapping[str, Any], nic: str) -> str:
    """The RDMA device name of a NIC column: its NIC Legend entry, or the column name itself (mlx5_0 headers)."""
    return str((topology.get("nic_names") or {}).get(nic, nic))


# ---------------------------------------------------------------- AMD: rocm-smi --showtopo

_SECTION = re.compile(r"^=+\s*(.*?)\s*=+$")
_AMD_NUMA = re.compile(r"^GPU\[(\d+)\]\s*:\s*\(Topology\)\s*Numa (Node|Affinity)\s*:\s*(-?\d+)")


def parse_rocm_showtopo(text: Optional[str]) -> Optional[dict[str, Any]]:
    """``rocm-smi --showtopo`` -> the same dict: links XGMI/PCIE, weights and hops per pair, NUMA node per GPU."""
    topology = _empty("rocm-smi")
    topology["weights"], topology["hops"] = {}, {}
    section = ""
    columns: list[str] = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        header = _SECTION.match(line)
        if header:
            section, columns = header.group(1).lower(), []
            continue
        numa = _AMD_NUMA.match(line)
        if numa:
            gpu = "GPU%s" % numa.group(1)
            key = "numa_affinity" if numa.group(2) == "Affinity" else "numa_node"
            topology.setdefault(key, {})[gpu] = numa.group(3)
            continue
        tokens = line.split()
        if not tokens or "between two gpus" not in section:
            continue
        if all(_GPU.match(token) for token in tokens):
            columns = tokens
            continue
        if not columns or not _GPU.match(tokens[0]):
            continue
        name, values = tokens[0], tokens[1:]
        if name not in topology["devices"]:
            topology["devices"].append(name)
            topology["gpus"].append(name)
            topology["links"][name] = {}
            topology["nvlinks"][name] = {}
        for peer, value in zip(columns, values):
            if peer == name:
                continue
            if section.startswith("link type"):
                topology["links"][name][peer] = value.upper()
            elif section.startswith(("weight", "hops")):
                try:
                    number = int(value)
                except ValueError:
                    topology["problems"].append("%s %s-%s: %r is not a number" % (section, name, peer, value))
                    continue
                topology["weights" if section.startswith("weight") else "hops"].setdefault(name, {})[peer] = number
    # rocm-smi names one NUMA node per GPU ("Numa Node"); it is what NUMA affinity means on the NVIDIA side.
    for gpu, node in (topology.pop("numa_node", None) or {}).items():
        topology["numa_affinity"].setdefault(gpu, node)
    if not topology["devices"]:
        return None
    return topology


# ---------------------------------------------------------------- reading

def read_nvidia_topology(nvidia_smi: str, timeout: float) -> dict[str, Any]:
    """Run ``nvidia-smi topo -m`` once (deadline ``timeout``) and parse it; ProbeError when it fails or prints no matrix."""
    rc, out, err = _command.run([nvidia_smi, "topo", "-m"], timeout)
    if rc != 0:
        first = ((err or out).strip().splitlines() or [""])[0]
        raise _command.ProbeError("%s topo -m exited with rc %s: %s" % (nvidia_smi, rc, first))
    parsed = parse_topology(out)
    if parsed is None:
        raise _command.ProbeError("%s topo -m printed no topology matrix: %r" % (nvidia_smi, out.strip()[:120]))
    return parsed


def read_rocm_topology(rocm_smi: str, timeout: float) -> dict[str, Any]:
    """Run ``rocm-smi --showtopo`` once (deadline ``timeout``) and parse it; ProbeError when it fails or prints no table."""
    rc, out, err = _command.run([rocm_smi, "--showtopo"], timeout)
    if rc != 0:
        first = ((err or out).strip().splitlines() or [""])[0]
        raise _command.ProbeError("%s --showtopo exited with rc %s: %s" % (rocm_smi, rc, first))
    parsed = parse_rocm_showtopo(out)
    if parsed is None:
        raise _command.ProbeError("%s --showtopo printed no topology table: %r" % (rocm_smi, out.strip()[:120]))
    return parsed


def _numa_nodes_with_cpus(root: str) -> Optional[int]:
    base = os.path.join(root, "sys/devices/system/node")
    if not os.path.isdir(base):
        return None
    count = 0
    for name in os.listdir(base):
        if re.match(r"^node\d+$", name) and (read_text_or_none(os.path.join(base, name, "cpulist")) or "").strip():
            count += 1
    return count


def _sockets(root: str) -> Optional[int]:
    base = os.path.join(root, "sys/devices/system/cpu")
    if not os.path.isdir(base):
        return None
    packages = set()
    for name in os.listdir(base):
        if re.match(r"^cpu\d+$", name):
            value = read_text_or_none(os.path.join(base, name, "topology/physical_package_id"))
            if value is not None and value.strip():
                packages.add(value.strip())
    return len(packages) or None


def _bound_cpus(root: str) -> Optional[str]:
    """The CPUs this process may run on (/proc/self/status Cpus_allowed_list): what a job started like it is bound to."""
    for line in (read_text_or_none(os.path.join(root, "proc/self/status")) or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return None


def read_sys_facts(root: str) -> dict[str, Any]:
    """The /sys side: NVIDIA GPU functions and RDMA devices with NUMA node and local CPUs, NUMA nodes, sockets."""
    devices_dir = os.path.join(root, "sys/bus/pci/devices")
    gpus: dict[str, Any] = {}
    if os.path.isdir(devices_dir):
        try:
            for function in scan_nvidia_functions(devices_dir)["gpus"]:
                gpus[function["address"]] = read_locality(os.path.join(devices_dir, function["address"]))
        except OSError as exc:
            raise _command.ProbeError("cannot read %s: %s" % (devices_dir, exc)) from None
    try:
        nics = rdma_devices(os.path.join(root, "sys/class/infiniband"))
    except OSError as exc:
        raise _command.ProbeError("cannot read %s: %s" % (os.path.join(root, "sys/class/infiniband"), exc)) from None
    return {"gpus": gpus, "nics": nics, "numa_nodes": _numa_nodes_with_cpus(root), "sockets": _sockets(root),
            "bound_cpus": _bound_cpus(root)}


# ---------------------------------------------------------------- placement score

# PCIe distance of a GPU-NIC path, 0 (same switch) .. 1 (across sockets): PIX 0, PXB 0.25, PHB 0.5, NODE 0.75, SYS 1.
PCIE_DISTANCE = {"PIX": 0.0, "PXB": 0.25, "PHB": 0.5, "NODE": 0.75, "SYS": 1.0}
DEFAULT_WEIGHTS = {"numa": 1.0, "pcie": 1.0, "cpu": 1.0}
# Linux's largest NR_CPUS (CONFIG_NR_CPUS_RANGE_END, x86_64 MAXSMP: 8192) with room to spare.
MAX_CPUS = 65536


def cpulist(text: Optional[str]) -> Optional[set[int]]:
    """A cpulist ("0-55,112-167", "0,2,4") as a set; None when empty, N/A or not a cpulist (a reversed range, or
    one past MAX_CPUS: a damaged cell must not make a set of billions)."""
    cpus: set[int] = set()
    for part in (text or "").strip().split(","):
        match = re.match(r"^(\d+)(?:-(\d+))?$", part.strip())
        if not match:
            return None
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        if last < first or last >= MAX_CPUS:
            return None
        cpus.update(range(first, last + 1))
    return cpus or None


def numa_id(text: Optional[str]) -> Optional[int]:
    """One NUMA node id from an affinity cell or sysfs value; None for N/A, -1, lists ("0-1") or nothing."""
    value = (text or "").strip()
    return int(value) if value.isdigit() else None


def nearest_nic(topology: Mapping[str, Any], gpu: str) -> Optional[tuple[str, str]]:
    """(NIC column, link kind) of the NIC nearest to a GPU (first in matrix order on a tie); None without NICs."""
    best: Optional[tuple[str, str]] = None
    for peer, kind in (topology.get("links") or {}).get(gpu, {}).items():
        if _GPU.match(peer):
            continue
        if best is None or link_rank(kind) < link_rank(best[1]):
            best = (peer, kind)
    return best


def placement(topology: Mapping[str, Any], gpu: str, gpu_numa: Optional[int] = None, nic_numa: Optional[int] = None,
              bound_cpus: Optional[str] = None, local_cpus: Optional[str] = None,
              weights: Optional[Mapping[str, float]] = None) -> dict[str, Any]:
    """A GPU's placement score, 0..100 (100: NIC on its PCIe switch, on its NUMA node, job bound to its CPUs).

    score = 100 * (1 - (w_numa*d_numa + w_pcie*d_pcie + w_cpu*d_cpu) / (w_numa + w_pcie + w_cpu)), over the terms
    that are known:
      d_pcie  PCIE_DISTANCE of the path to the nearest NIC (nvidia-smi's kind)
      d_numa  0 when that NIC is on the GPU's NUMA node, else 1 (from /sys when both nodes are known, else 1 for SYS)
      d_cpu   share of the job's CPUs (``bound_cpus``) outside the GPU's local CPUs (``local_cpus``, else CPU Affinity)
    No term known (no NIC, no CPU facts): score None.
    """
    chosen = dict(DEFAULT_WEIGHTS, **dict(weights or {}))
    terms: dict[str, float] = {}
    nic = nearest_nic(topology, gpu)
    if nic is not None and nic[1] in PCIE_DISTANCE:
        terms["pcie"] = PCIE_DISTANCE[nic[1]]
        if gpu_numa is not None and nic_numa is not None:
            terms["numa"] = 0.0 if gpu_numa == nic_numa else 1.0
        else:
            terms["numa"] = 1.0 if nic[1] == "SYS" else 0.0
    bound = cpulist(bound_cpus)
    local = cpulist(local_cpus) or cpulist((topology.get("cpu_affinity") or {}).get(gpu))
    if bound and local:
        terms["cpu"] = round(len(bound - local) / float(len(bound)), 4)
    total = sum(chosen[name] for name in terms)
    score = None
    if terms and total > 0:
        score = round(100.0 * (1.0 - sum(chosen[name] * value for name, value in terms.items()) / total), 1)
    return {"score": score, "nearest_nic": nic[0] if nic else None, "nic_link": nic[1] if nic else None,
            "distances": terms, "weights": dict((name, chosen[name]) for name in DEFAULT_WEIGHTS)}

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU topology check: a pure function of the topology probe (``nvidia-smi topo -m`` / ``rocm-smi --showtopo`` plus
/sys) and, for GPU PCI addresses, the nvidia-smi probe. Rules and the placement score: docs/topology.md.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections import Counter
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.topology import link_rank, nearest_nic, numa_id, nvlink_count, placement, rdma_name
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import pci_key
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS, READ_OK, SKIP, WARN, worst

NVLINKS_PER_PAIR = _expect.key("nvlinks_per_pair")
WEIGHT_NUMA = _expect.key("placement_weight_numa")
WEIGHT_PCIE = _expect.key("placement_weight_pcie")
WEIGHT_CPU = _expect.key("placement_weight_cpu")

# NCCL uses GPUDirect RDMA (GPU-NIC) and P2P (GPU-GPU) only at PXB or closer by default (src/graph/paths.cc).
GDR_RANK = link_rank("PXB")
# A pair count is the box's design when at least this share of its GPU pairs have it (NVSwitch boxes: all of
# them); a hybrid mesh (DGX-1: NV1 and NV2 about half each) has no dominant count and is not judged without
# hydra_expect.nvlinks_per_pair.
DOMINANT_SHARE = 2.0 / 3.0
HIDDEN = ("", "N/A")


def weights(expect: Expect) -> dict[str, float]:
    """The placement weights from hydra_expect (placement_weight_numa / _pcie / _cpu)."""
    return {"numa": float(_expect.get(expect, WEIGHT_NUMA)), "pcie": float(_expect.get(expect, WEIGHT_PCIE)),
            "cpu": float(_expect.get(expect, WEIGHT_CPU))}


def gpu_addresses(topology: Mapping[str, Any], smi: Optional[Mapping[str, Any]], sys_gpus: Mapping[str, Any]) -> dict[str, str]:
    """GPU column -> sysfs PCI address: nvidia-smi's index -> bus id when it was read, else sysfs order (nvidia-smi
    numbers GPUs in PCI bus order by default) when the counts agree."""
    by_key = dict((pci_key(address), address) for address in sys_gpus)
    found: dict[str, str] = {}
    for gpu in ((smi or {}).get("gpus") or []):
        address = by_key.get(pci_key(gpu.get("pci_bus_id")))
        if address is not None and gpu.get("index") is not None:
            found["GPU%s" % gpu["index"]] = address
    if not found and len(sys_gpus) == len(topology["gpus"]):
        found = dict(zip(topology["gpus"], sorted(sys_gpus)))
    return found


def _pairs(topology: Mapping[str, Any]) -> dict[tuple[str, str], int]:
    """Each unordered GPU pair -> bonded NVLinks (0 for a PCIe path)."""
    gpus = topology["gpus"]
    out = {}
    for first_index, first in enumerate(gpus):
        for second in gpus[first_index + 1:]:
            out[(first, second)] = nvlink_count(topology["links"].get(first, {}).get(second)) or 0
    return out


def nvlink_findings(topology: Mapping[str, Any], expected: Optional[int]) -> tuple[list[tuple[str, str]], list[str]]:
    """(problems as (status, text), notes): pairs under hydra_expect.nvlinks_per_pair (FAIL), pairs weaker than the
    box's dominant NVLink count (WARN)."""
    pairs = _pairs(topology)
    problems: list[tuple[str, str]] = []
    if not pairs or not any(pairs.values()):
        if expected:
            problems.append((FAIL, "no NVLink between GPUs where nvlinks_per_pair=%d is expected" % expected))
        return problems, []
    if expected:
        short = ["%s-%s %s" % (a, b, "NV%d" % n if n else "no NVLink") for (a, b), n in pairs.items() if n < expected]
        if short:
            problems.append((FAIL, "GPU pairs under nvlinks_per_pair=%d: %s" % (expected, ", ".join(short))))
        return problems, []
    count, seen = Counter(pairs.values()).most_common(1)[0]
    if count == 0 or seen < DOMINANT_SHARE * len(pairs):
        return [], ["no dominant NVLink count (%s): a mesh by design; set nvlinks_per_pair to judge it" %
                    ", ".join("NV%d x%d" % (n, c) if n else "PCIe x%d" % c for n, c in sorted(Counter(pairs.values()).items()))]
    weak = ["%s-%s %s" % (a, b, "NV%d" % n if n else "no NVLink") for (a, b), n in pairs.items() if n < count]
    if weak:
        problems.append((WARN, "GPU pairs weaker than the box's NV%d: %s" % (count, ", ".join(weak))))
    return problems, []


def nic_findings(topology: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A GPU with no NIC at PXB or closer while other GPUs have one (GPUDirect RDMA off for it by default)."""
    near = dict((gpu, nearest_nic(topology, gpu)) for gpu in topology["gpus"])
    close = [gpu for gpu, nic in near.items() if nic is not None and link_rank(nic[1]) <= GDR_RANK]
    far = [gpu for gpu, nic in near.items() if nic is not None and link_rank(nic[1]) > GDR_RANK]
    if close and far:
        return [(WARN, "no NIC at PXB or closer for %s (nearest: %s) while %d other GPU(s) have one" % (
            ", ".join(far), ", ".join("%s %s" % (rdma_name(topology, near[gpu][0]), near[gpu][1]) for gpu in far
                                      if near[gpu] is not None), len(close)))]
    return []


def numa_findings(topology: Mapping[str, Any], sys_facts: Mapping[str, Any], addresses: Mapping[str, str]) -> list[tuple[str, str]]:
    """NUMA affinity hidden (numa=off, N/A on a multi-socket host) or contradicting /sys."""
    found: list[tuple[str, str]] = []
    gpus = topology["gpus"]
    shown = topology.get("numa_affinity") or {}
    sockets, nodes = sys_facts.get("sockets"), sys_facts.get("numa_nodes")
    hidden = [gpu for gpu in gpus if gpu in shown and shown[gpu].strip() in HIDDEN]
    cpu_sets = set((topology.get("cpu_affinity") or {}).get(gpu) for gpu in gpus) - {None, "", "N/A"}
    if sockets and sockets > 1 and nodes is not None and nodes <= 1:
        found.append((WARN, "%d CPU sockets but %d NUMA node(s) with CPUs: NUMA is hidden (numa=off or BIOS "
                            "node interleaving?)" % (sockets, nodes)))
    elif hidden and ((sockets or 0) > 1 or (nodes or 0) > 1 or len(cpu_sets) > 1):
        found.append((WARN, "NUMA affinity hidden (N/A) for %s on a host with several NUMA nodes" % ", ".join(hidden)))
    sys_gpus = sys_facts.get("gpus") or {}
    wrong = []
    for gpu in gpus:
        topo_node = numa_id(shown.get(gpu))
        address = addresses.get(gpu)
        sys_node = (sys_gpus.get(address) or {}).get("numa_node") if address else None
        if topo_node is not None and sys_node is not None and topo_node != sys_node:
            wrong.append("%s (topo %d, /sys %s numa_node %d)" % (gpu, topo_node, address, sys_node))
    if wrong:
        found.append((WARN, "NUMA affinity contradicts /sys for %s" % ", ".join(wrong)))
    return found


def per_gpu(topology: Mapping[str, Any], sys_facts: Mapping[str, Any], addresses: Mapping[str, str],
            chosen: Mapping[str, float]) -> list[dict[str, Any]]:
    """Details per GPU: nearest NIC and its link, NVLinks per peer, NUMA (topo and /sys), placement score."""
    sys_gpus, sys_nics = sys_facts.get("gpus") or {}, sys_facts.get("nics") or {}
    rows = []
    for gpu in topology["gpus"]:
        sys_gpu = sys_gpus.get(addresses.get(gpu) or "") or {}
        nic = nearest_nic(topology, gpu)
        nic_sys = (sys_nics.get(rdma_name(topology, nic[0])) or {}) if nic else {}
        gpu_numa = sys_gpu.get("numa_node")
        if gpu_numa is None:
            gpu_numa = numa_id((topology.get("numa_affinity") or {}).get(gpu))
        score = placement(topology, gpu, gpu_numa, nic_sys.get("numa_node"), sys_facts.get("bound_cpus"),
                          sys_gpu.get("local_cpulist"), chosen)
        rows.append({"gpu": gpu, "pci_address": addresses.get(gpu),
                     "nearest_nic": rdma_name(topology, nic[0]) if nic else None, "nic_link": nic[1] if nic else None,
                     "nvlinks": dict((topology.get("nvlinks") or {}).get(gpu) or {}),
                     "numa_topo": (topology.get("numa_affinity") or {}).get(gpu),
                     "numa_sys": sys_gpu.get("numa_node"), "cpu_affinity": (topology.get("cpu_affinity") or {}).get(gpu),
                     "placement_score": score["score"], "placement": score})
    return rows


def unreadable_findings(topology: Mapping[str, Any], smi: Optional[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """ERROR when part of the matrix could not be read (a damaged or cut row, a GPU column with no row, a cell that
    is no link kind) or when it lists fewer GPUs than nvidia-smi: a GPU nothing was read for is never judged healthy."""
    found = [(ERROR, "%s output damaged: %s" % (topology.get("source"), "; ".join(topology["problems"])))] \
        if topology.get("problems") else []
    listed = len((smi or {}).get("gpus") or [])
    if topology.get("source") == "nvidia-smi" and listed > len(topology["gpus"]):
        found.append((ERROR, "nvidia-smi lists %d GPUs, its topology matrix %d" % (listed, len(topology["gpus"]))))
    return found


@check("gpu.topology", "GPU / NIC / NUMA topology", requires=("topology",), uses=("nvidia_smi",))
def topology_check(probes: Probes, expect: Expect) -> Finding:
    """Reads `nvidia-smi topo -m` (or `rocm-smi --showtopo`) and /sys: each GPU's nearest NIC, NVLinks per pair, NUMA node.

    WARN when a GPU has no NIC at PXB or closer while other GPUs have one (NCCL then runs it without GPUDirect
    RDMA), when a GPU pair has fewer bonded NVLinks than the box's dominant count (at least 2/3 of its pairs),
    when NUMA is hidden (several sockets but one NUMA node, or N/A affinity on a multi-node host) or when a
    GPU's NUMA affinity contradicts its PCI device's numa_node in /sys. FAIL when `nvlinks_per_pair` is set
    and a GPU pair has fewer NVLinks. ERROR when part of the matrix could not be read (a cut or damaged row, a
    GPU column without its row, a cell that is no link kind) or it lists fewer GPUs than nvidia-smi. PASS
    otherwise, with a placement score per GPU (docs/topology.md);
    SKIP on a host with one GPU and no NIC.

    Remediation: move the GPU or NIC so each GPU shares a PCIe switch with a NIC; reseat or service a GPU
    with missing NVLinks (gpu.nvlink, gpu.fabric_manager); remove `numa=off` from the kernel command line
    and turn off NUMA interleaving in the BIOS.
    """
    data = probes["topology"]["data"]
    topology, sys_facts = data["topology"], data.get("sys") or {}
    gpus = topology["gpus"]
    nic_columns = set(peer for gpu in gpus for peer in topology["links"].get(gpu, {}) if peer not in gpus)
    if topology.get("problems") and len(gpus) < 2:
        return finding(ERROR, "%s output damaged: %s" % (topology.get("source"), "; ".join(topology["problems"])),
                       {"source": topology.get("source"), "problems": list(topology["problems"])})
    if not gpus:
        return finding(SKIP, "the topology lists no GPU", {"source": topology.get("source")})
    if len(gpus) < 2 and not nic_columns:
        return finding(SKIP, "one GPU and no NIC: no GPU or NIC to place it against", {"source": topology.get("source")})
    smi = probes["nvidia_smi"]["data"] if probes["nvidia_smi"].get("status") == READ_OK else None
    addresses = gpu_addresses(topology, smi, sys_facts.get("gpus") or {})
    expected = _expect.get(expect, NVLINKS_PER_PAIR)
    nvlink_problems, notes = nvlink_findings(topology, expected) if topology.get("source") == "nvidia-smi" else ([], [])
    problems = nvlink_problems + nic_findings(topology) + numa_findings(topology, sys_facts, addresses)
    problems += unreadable_findings(topology, smi)
    details = {"source": topology.get("source"), "gpus": per_gpu(topology, sys_facts, addresses, weights(expect)),
               "problems": [text for _status, text in problems], "notes": notes + list(topology.get("problems") or [])}
    if not problems:
        return finding(PASS, "%d GPU(s), %d NIC(s): NICs, NVLinks and NUMA as expected" % (len(gpus), len(nic_columns)),
                       details)
    status = worst(found for found, _text in problems)
    return finding(status, "; ".join(text for _status, text in problems), details,
                   "Put each GPU on a PCIe switch with a NIC; service GPUs with missing NVLinks (see gpu.nvlink); "
                   "remove numa=off / NUMA interleaving so NUMA is visible.")

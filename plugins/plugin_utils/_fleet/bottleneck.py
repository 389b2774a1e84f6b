# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fleet bottleneck: what limits most hosts, from each host's profile verdict (pure).

Each host's verdict names a primary bottleneck (and a secondary one, with a confidence). The fleet's
bottleneck is the primary bottleneck of the most hosts (one host, one vote); per class too. Actions
come from the verdict when it carries one, else from a table keyed by the bottleneck's name, and are
ranked by the number of hosts they apply to.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.figures import number

PCIE = "check the PCIe links (doctor gpu.pcie_link: gen and width), use pinned memory for host-to-GPU copies"
NETWORK = "check the InfiniBand/RoCE ports and the NCCL settings (doctor network.ib_ports, nccl.env_config)"
STORAGE = "stage the data set on local NVMe, raise read-ahead and data-loader workers"
HBM = "GPU memory bandwidth bound: larger batches or fused kernels raise arithmetic intensity"
# A hint applies when all its words are words of the bottleneck's name (split on "_", "-", " ");
# the first that applies wins, so gpu_memory_bandwidth is HBM, not host memory.
ACTION_HINTS = (
    (("pcie",), PCIE), (("h2d",), PCIE), (("d2h",), PCIE), (("host", "link"), PCIE),
    (("nvlink",), "check NVLink and the fabric manager (doctor gpu.nvlink), and the GPU topology"),
    (("network",), NETWORK), (("nccl",), NETWORK), (("interconnect",), NETWORK), (("infiniband",), NETWORK),
    (("storage",), STORAGE), (("disk",), STORAGE), (("io",), STORAGE), (("dataloader",), STORAGE),
    (("thermal",), "check cooling, fans and inlet temperature; the GPUs throttle"),
    (("power",), "check the GPU power limits and the PSU/PDU capacity; the GPUs throttle"),
    (("clocks",), "check the GPU application clocks and power limits (continuum.hydra.gpu_settings)"),
    (("gpu", "memory"), HBM), (("hbm",), HBM),
    (("gpu",), "GPU compute bound: the hardware is the limit; use bf16/fp8 and scale out"),
    (("memory",), "host memory bandwidth bound: populate every memory channel and bind workers to their NUMA node"),
    (("cpu",), "CPU bound: more data-loader workers, faster preprocessing, or offload it to the GPU"),
)


def action_for(bottleneck: str, verdict: Optional[Mapping[str, Any]] = None) -> str:
    verdict = verdict or {}
    for key in ("action", "remediation"):
        if isinstance(verdict.get(key), str) and verdict[key].strip():
            return verdict[key].strip()
    actions = verdict.get("actions")
    if isinstance(actions, list) and actions and isinstance(actions[0], str):
        return actions[0]
    words = set(re.split(r"[_\-\s]+", bottleneck.lower()))
    for keys, hint in ACTION_HINTS:
        if words.issuperset(keys):
            return hint
    return "see the profile results of these hosts for what limits %s" % bottleneck


def _verdict(summary: Optional[Mapping[str, Any]]) -> Optional[dict[str, Any]]:
    verdict = (summary or {}).get("verdict")
    if not isinstance(verdict, dict):
        return None
    primary = verdict.get("primary_bottleneck")
    return verdict if isinstance(primary, str) and primary else None


def _ranked_groups(host_verdicts: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    groups: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for host, verdict in host_verdicts:
        groups.setdefault(verdict["primary_bottleneck"], []).append((host, verdict))
    total = len(host_verdicts)
    out: list[dict[str, Any]] = []
    for name, members in groups.items():
        confidences = [c for c in (number(v.get("confidence")) for _unused, v in members) if c is not None]
        secondary: dict[str, int] = {}
        for _unused, verdict in members:
            second = verdict.get("secondary_bottleneck")
            if isinstance(second, str) and second:
                secondary[second] = secondary.get(second, 0) + 1
        out.append({"bottleneck": name, "hosts": sorted(h for h, _unused in members), "host_count": len(members),
                    "share": len(members) / float(total),
                    "mean_confidence": sum(confidences) / len(confidences) if confidences else None,
                    "secondary": dict(sorted(secondary.items())),
                    "action": action_for(name, members[0][1])})
    out.sort(key=lambda g: (-g["host_count"], g["bottleneck"]))
    return out


def analyse_bottleneck(profiles: Mapping[str, Any], host_class: Mapping[str, Optional[str]]) -> dict[str, Any]:
    """The fleet's and each class's bottleneck, and the actions ranked by hosts affected."""
    host_verdicts = [(h, v) for h, v in ((host, _verdict(profiles[host])) for host in sorted(profiles)) if v is not None]
    groups = _ranked_groups(host_verdicts)
    by_class: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for host, verdict in host_verdicts:
        by_class.setdefault(host_class.get(host) or "unclassified", []).append((host, verdict))
    classes = {}
    for name in sorted(by_class):
        ranked = _ranked_groups(by_class[name])
        classes[name] = {"primary": ranked[0]["bottleneck"], "host_count": ranked[0]["host_count"],
                         "share": ranked[0]["share"], "hosts_with_verdict": len(by_class[name])}
    actions: dict[str, dict[str, Any]] = {}
    for group in groups:
        action = actions.setdefault(group["action"], {"action": group["action"], "bottlenecks": [], "hosts": []})
        action["bottlenecks"].append(group["bottleneck"])
        action["hosts"].extend(group["hosts"])
    ranked_actions = sorted(({"action": a["action"], "bottlenecks": a["bottlenecks"], "hosts": sorted(a["hosts"]),
                              "host_count": len(a["hosts"])} for a in actions.values()),
                            key=lambda a: (-a["host_count"], a["action"]))
    return {
        "primary": groups[0]["bottleneck"] if groups else None,
        "hosts_with_verdict": len(host_verdicts),
        "by_bottleneck": groups,
        "by_class": classes,
        "actions": ranked_actions,
    }

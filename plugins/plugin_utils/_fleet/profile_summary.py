# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""One host's profile result -> the compact figures and verdict the fleet report shows for it (pure).

The callback stores, per host, the profile module's ``schema_version``,
``static_profile``, ``benchmarks``, ``analysis`` and ``remediation`` (or the
whole result) and hands them to profile_summary(). Fleet-wide analysis
(classes, stragglers) works on these rows.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.topology import rdma_name
from ansible_collections.continuum.hydra.plugins.module_utils._status import BENCH_OK
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.figures import GPU_BENCHMARK, benchmark, gpu_figure_row, gpu_spreads, profile_figures

TOP = 3


def _section(result: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = result.get(key)
    return value if isinstance(value, dict) else {}


def placement(result: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The static profile's placement score per GPU column (gpu_topology.placement), the NIC by its RDMA name:
    {"GPU0": {score, nearest_nic, nic_link}}; None without one (_fleet/placement.py reads it)."""
    topology = _section(result, "static_profile").get("gpu_topology")
    if not isinstance(topology, dict):
        return None
    scores = topology.get("placement")
    if not isinstance(scores, dict) or not scores:
        return None
    return dict((str(gpu), {"score": p.get("score"), "nic_link": p.get("nic_link"),
                            "nearest_nic": rdma_name(topology, p["nearest_nic"]) if p.get("nearest_nic") else None})
                for gpu, p in scores.items() if isinstance(p, dict))


def profile_summary(result: object) -> Optional[dict[str, Any]]:
    """Compact per-host row: verdict, headline figures, per-GPU figures; None for something that is no profile."""
    if not isinstance(result, dict) or not isinstance(result.get("benchmarks"), dict):
        return None
    analysis = _section(result, "analysis")
    remediation = _section(result, "remediation")
    static_gpus = {gpu.get("index"): gpu for gpu in _section(result, "static_profile").get("gpus") or []}
    gpus = []
    for entry in benchmark(result, GPU_BENCHMARK).get("gpus") or []:
        telemetry = entry.get("telemetry") or {}
        static = static_gpus.get(entry.get("index")) or {}
        # uuid follows a GPU across hosts and runs (history); memory bounds its share of a batch plan.
        row = {"index": entry.get("index"), "name": entry.get("name"), "status": entry.get("status"),
               "sku": static.get("sku"), "uuid": static.get("uuid"), "memory_total_mib": static.get("memory_total_mib")}
        row.update(gpu_figure_row(entry))
        row["throttle_reasons"] = telemetry.get("throttle_reasons") or []
        row["temperature_max_c"] = telemetry.get("temperature_max_c")
        gpus.append(row)
    measured = [row for row in gpus if row["status"] == BENCH_OK]
    temperatures = [row["temperature_max_c"] for row in measured if row["temperature_max_c"] is not None]
    figures = profile_figures(result)
    figures.update({
        "gpu_count": len(gpus),
        "gpu_measured": len(measured),
        "gpu_throttle_reasons": sorted({reason for row in measured for reason in row["throttle_reasons"]}),
        "gpu_temperature_max_c": max(temperatures) if temperatures else None,
    })
    figures.update(gpu_spreads(measured))
    return {
        "schema_version": result.get("schema_version"),
        "verdict": {
            "primary_bottleneck": analysis.get("primary_bottleneck"),
            "secondary_bottleneck": analysis.get("secondary_bottleneck"),
            "confidence": analysis.get("confidence"),
            "priority": remediation.get("priority"),
            "reasons": list(analysis.get("reasons") or [])[:TOP],
            "actions": [action.get("title") for action in (remediation.get("actions") or [])[:TOP]],
        },
        "benchmark_status": {key: (value or {}).get("status") for key, value in sorted(result["benchmarks"].items())},
        "figures": figures,
        "gpus": gpus,
        "placement": placement(result),
    }

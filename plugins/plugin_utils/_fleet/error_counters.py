# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Peer-relative error counters: a GPU whose error count is far above its hardware class's (pure).

doctor's checks judge each counter against an absolute threshold (100 correctable ECC errors, 100 PCIe
replays, 512 rows remapped); a GPU well under it can still count 50 times what its peers count, the
early sign of a failing board, riser or memory. Per hardware class and counter, every GPU's count is
compared with the class's GPUs with the robust z the stragglers use (_fleet/stats.py):

- robust z = (count - class median) / (MAD / 0.6745), the mean absolute deviation x 1.2533 when MAD is 0;
- an outlier is high-side only: robust z >= 3.5, count >= ``min_count`` (10) and count >= ``min_ratio`` (3)
  x the class median (any count >= min_count when the median is 0);
- a class and counter with fewer than ``min_peers`` (5) GPUs are not judged (``too_few_peers``).

An outlier is WARN in the fleet analysis (``status``), whatever doctor's check said.

Counts come from the checks' ``details.counts_by_gpu`` (every judged GPU, whatever its verdict):
gpu.ecc_errors volatile correctable ECC errors (since the driver loaded), gpu.pcie_replay PCIe replays,
gpu.row_remap rows remapped (correctable + uncorrectable; retired pages on pre-Ampere GPUs).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._status import WARN
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.stats import Spread

# counter name -> the doctor check whose details.counts_by_gpu hold it
COUNTERS: dict[str, str] = {
    "ecc_correctable": "gpu.ecc_errors",
    "pcie_replays": "gpu.pcie_replay",
    "rows_remapped": "gpu.row_remap",
}
DEFAULT_RULE: dict[str, float] = {"robust_z": 3.5, "min_ratio": 3.0, "min_count": 10, "min_peers": 5}
GPU_REF = ("index", "pci_bus_id", "uuid", "name")


def _counts(entry: Mapping[str, Any]) -> dict[str, list[Mapping[str, Any]]]:
    """{counter: [per-GPU count entry]} of one host entry of the fleet report."""
    doctor: Mapping[str, Any] = entry["doctor"] if isinstance(entry.get("doctor"), Mapping) else {}
    by_check = dict((check_id, counter) for counter, check_id in COUNTERS.items())
    out: dict[str, list[Mapping[str, Any]]] = {}
    for chk in doctor.get("checks") or []:
        counter = by_check.get(str(chk.get("id"))) if isinstance(chk, Mapping) else None
        details = chk.get("details") if counter else None
        if not isinstance(details, Mapping):
            continue
        for item in details.get("counts_by_gpu") or []:
            value = item.get("count") if isinstance(item, Mapping) else None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out.setdefault(str(counter), []).append(item)
    return out


def _is_outlier(value: float, spread: Spread, z: Optional[float], rule: Mapping[str, float]) -> bool:
    if z is None or z < rule["robust_z"] or value < rule["min_count"]:
        return False
    return spread.median <= 0 or value >= rule["min_ratio"] * spread.median


def analyse_error_counters(hosts: Mapping[str, Any], host_class: Mapping[str, Optional[str]],
                           rule: Optional[Mapping[str, float]] = None) -> dict[str, Any]:
    """hosts: the report's hosts; host_class: {host: class}. Returns {rule, distributions, outliers, hosts, too_few_peers}."""
    rule = dict(DEFAULT_RULE, **(rule or {}))
    samples: dict[tuple[str, str], list[tuple[str, Mapping[str, Any], float]]] = {}
    for host in sorted(hosts):
        class_name = host_class.get(host)
        entry = hosts[host]
        if class_name is None or not isinstance(entry, Mapping):
            continue
        for counter, items in _counts(entry).items():
            for item in items:
                samples.setdefault((class_name, counter), []).append((host, item, float(item["count"])))
    distributions: dict[str, dict[str, Any]] = {}
    outliers: list[dict[str, Any]] = []
    too_few: dict[str, list[str]] = {}
    for (class_name, counter), values in sorted(samples.items()):
        if len(values) < rule["min_peers"]:
            too_few.setdefault(class_name, []).append(counter)
            continue
        spread = Spread([v for _host, _item, v in values])
        distributions.setdefault(counter, {})[class_name] = dict(spread.describe(), max=max(v for _h, _i, v in values))
        for host, item, value in values:
            z = spread.score(value)
            if _is_outlier(value, spread, z, rule):
                out = dict((k, item.get(k)) for k in GPU_REF)
                out.update({"host": host, "class": class_name, "counter": counter, "check_id": COUNTERS[counter],
                            "value": item["count"], "median": spread.median,
                            "ratio": value / spread.median if spread.median > 0 else None, "robust_z": z, "status": WARN})
                outliers.append(out)
    outliers.sort(key=lambda o: (o["host"], o["counter"], str(o["index"]), str(o["uuid"])))
    return {
        "rule": rule,
        "distributions": distributions,
        "outliers": outliers,
        "hosts": dict((o["host"], WARN) for o in outliers),
        "too_few_peers": too_few,
    }

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU placement scores across the fleet: per host the lowest score and the GPUs below a threshold, per class the
median (pure).

A GPU's placement score (0..100, docs/topology.md) comes from doctor's ``gpu.topology`` check (``details.gpus[]``:
``gpu``, ``placement_score``, ``nearest_nic``, ``nic_link``), else from the profile summary's ``placement`` (the
static profile's ``gpu_topology.placement``, _fleet/profile_summary.py). doctor's score is preferred: it knows the
NIC's NUMA node and the GPU's local CPUs from /sys. A host whose ``gpu.topology`` could not read the topology (ERROR,
or blocked by a failed probe) and has no profile score is listed in ``unscored`` with the check's message: an unread
placement is never a good one. A topology read with nothing to place against (one GPU and no NIC: SKIP; no NIC and
no CPU facts: no score) is neither scored nor listed.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import math
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.stats import median

PLACEMENT_KIND = "continuum.hydra.placement"
CHECK_ID = "gpu.topology"
DEFAULT_THRESHOLD = 60.0
DOCTOR, PROFILE = "doctor", "profile"


class PlacementSettingError(ValueError):
    """A placement threshold that is no number from 0 to 100."""


def threshold_value(value: object) -> float:
    """The threshold setting as a float in 0..100; PlacementSettingError naming the value otherwise."""
    number = math.nan
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        try:
            number = float(value)
        except ValueError:
            pass
    if not math.isfinite(number) or not 0.0 <= number <= 100.0:
        raise PlacementSettingError("placement_threshold: %r is not a score from 0 to 100" % (value,))
    return number


def _score(value: object) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _topology_check(entry: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    for chk in (entry.get("doctor") or {}).get("checks") or []:
        if isinstance(chk, dict) and chk.get("id") == CHECK_ID:
            return chk
    return None


def host_scores(entry: Mapping[str, Any]) -> tuple[Optional[str], list[dict[str, Any]], Optional[str]]:
    """(source, [{gpu, score, nearest_nic, nic_link}], why unscored): the host's GPUs with their placement, from
    doctor's gpu.topology or else the profile; why unscored is the reason when gpu.topology could not read the topology."""
    chk = _topology_check(entry)
    why = None
    if chk is not None:
        rows = [{"gpu": str(g.get("gpu")), "score": _score(g.get("placement_score")), "nearest_nic": g.get("nearest_nic"),
                 "nic_link": g.get("nic_link")}
                for g in (chk.get("details") or {}).get("gpus") or [] if isinstance(g, dict) and g.get("gpu") is not None]
        if any(row["score"] is not None for row in rows):
            return DOCTOR, rows, None
        if chk.get("status") == ERROR or chk.get("blocked_by"):
            why = "%s %s: %s" % (CHECK_ID, chk.get("status"), chk.get("message") or "no placement score")
    profiled = (entry.get("profile") or {}).get("placement")
    if isinstance(profiled, dict):
        rows = [{"gpu": str(gpu), "score": _score(p.get("score")), "nearest_nic": p.get("nearest_nic"), "nic_link": p.get("nic_link")}
                for gpu, p in sorted(profiled.items(), key=lambda kv: _gpu_order(kv[0])) if isinstance(p, dict)]
        if any(row["score"] is not None for row in rows):
            return PROFILE, rows, None
    return None, [], why


def _gpu_order(name: str) -> tuple[int, str]:
    digits = "".join(ch for ch in name if ch.isdigit())
    return (int(digits) if digits else -1, name)


def analyse_placement(hosts: Mapping[str, Mapping[str, Any]], host_class: Optional[Mapping[str, Optional[str]]] = None,
                      threshold: float = DEFAULT_THRESHOLD) -> Optional[dict[str, Any]]:
    """The report's ``placement`` section, or None when no host has a placement score or a reason it has none.

    hosts: the report's host entries; host_class: {host: fleet class or None} (default: each entry's ``class``).
    Returns {kind, threshold, hosts: {host: {class, source, lowest, gpus [{gpu, score, nearest_nic, nic_link,
    below}]}}, below: [{host, class, gpu, score, nearest_nic, nic_link}] (lowest score first), classes: {class:
    {hosts, gpus, median, lowest}}, unscored: [{host, reason}]}. A GPU is below when its score is under the
    threshold; the class median is over every scored GPU of the class's hosts.
    """
    out_hosts: dict[str, dict[str, Any]] = {}
    below: list[dict[str, Any]] = []
    unscored: list[dict[str, Any]] = []
    per_class: dict[str, dict[str, Any]] = {}
    for host in sorted(hosts):
        entry = hosts[host]
        source, rows, why = host_scores(entry)
        if source is None:
            if why:
                unscored.append({"host": host, "reason": why})
            continue
        klass = host_class.get(host) if host_class is not None else entry.get("class")
        scores = [row["score"] for row in rows if row["score"] is not None]
        for row in rows:
            row["below"] = row["score"] is not None and row["score"] < threshold
            if row["below"]:
                below.append({"host": host, "class": klass, "gpu": row["gpu"], "score": row["score"],
                              "nearest_nic": row["nearest_nic"], "nic_link": row["nic_link"]})
        out_hosts[host] = {"class": klass, "source": source, "lowest": min(scores), "gpus": rows}
        if klass:
            group = per_class.setdefault(klass, {"hosts": [], "scores": []})
            group["hosts"].append(host)
            group["scores"].extend(scores)
    if not out_hosts and not unscored:
        return None
    below.sort(key=lambda b: (b["score"], b["host"], _gpu_order(b["gpu"])))
    classes = dict((klass, {"hosts": len(g["hosts"]), "gpus": len(g["scores"]), "median": median(sorted(g["scores"])),
                            "lowest": min(g["scores"])}) for klass, g in sorted(per_class.items()))
    return {"kind": PLACEMENT_KIND, "threshold": threshold, "hosts": out_hosts, "below": below, "classes": classes,
            "unscored": unscored}

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Hardware classes: the peer groups drift and stragglers are judged in (pure).

Automatic classes group hosts by GPU vendor and model x GPU count, CPU model and memory size bucket
("8x AMD Instinct MI300X": a GPU name without its vendor's word gets it, so an AMD and an NVIDIA host never share
a class; nvidia-smi names such as "Tesla T4" keep their name, as before vendors were told apart). With
``class_groups`` the user names inventory groups instead: a host's class is the first of those
groups it belongs to, and hosts in none of them fall back to the automatic class.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import math
from collections.abc import Iterable, Mapping
from typing import Any, Optional

Facts = Optional[Mapping[str, Any]]

HARDWARE = "hardware"
GROUP = "group"
GIB = 1024 ** 3

# MemTotal is a little below the installed size (firmware and kernel reservations): 503 GiB is a
# 512 GiB machine. Installed sizes are powers of two or 1.5 times one, so the nearest of those in
# log scale names the bucket.
MEMORY_LADDER_GIB = sorted(set([2 ** k for k in range(0, 16)] + [3 * 2 ** k for k in range(0, 15)]))


def memory_bucket_gib(memory_bytes: Optional[float]) -> Optional[int]:
    """Installed memory size in GiB that a MemTotal byte count stands for; None when unknown."""
    if not memory_bytes or memory_bytes <= 0:
        return None
    gib = math.log(memory_bytes / float(GIB))
    return min(MEMORY_LADDER_GIB, key=lambda size: abs(math.log(size) - gib))


# Vendors whose word a class's GPU part must contain (fleet facts' gpu_vendor -> word).
VENDOR_WORDS = {"amd": "AMD"}


def vendor_model(facts: Mapping[str, Any]) -> str:
    """The GPU model with its vendor's word where the name lacks it (an AMD GPU's sysfs name, a renamed board)."""
    model = facts["gpu_model"]
    word = VENDOR_WORDS.get(facts.get("gpu_vendor") or "")
    return "%s %s" % (word, model) if word and word not in model.upper().split() else model


def hardware_key(facts: Facts) -> Optional[tuple[str, str, str]]:
    """(gpu part, cpu part, memory part) of a host, or None when its GPUs are unknown (the GPU tool failed)."""
    if facts is None or facts["gpu_model"] is None:
        return None
    bucket = memory_bucket_gib(facts["memory_total_bytes"])
    model = vendor_model(facts)
    gpus = model if not facts["gpu_count"] else "%dx %s" % (facts["gpu_count"], model)
    return (gpus, facts["cpu_model"] or "unknown CPU", "%s GiB" % bucket if bucket else "unknown memory")


def family_key(facts: Facts) -> Optional[tuple[str, str, str]]:
    """The hardware key without the GPU count: the peers a host's GPU count is compared with."""
    key = hardware_key(facts)
    return None if key is None or facts is None else (vendor_model(facts), key[1], key[2])


def class_name(key: Iterable[str]) -> str:
    return " | ".join(key)


def classify(facts_by_host: Mapping[str, Facts], host_groups: Optional[Mapping[str, Iterable[str]]] = None,
             class_groups: Iterable[str] = ()) -> tuple[dict[str, Optional[str]], dict[str, dict[str, Any]]]:
    """Each host's class and each class's description.

    Returns (host_class, classes): host_class maps every host to its class name (None: unclassified,
    no facts or unknown GPUs); classes maps a class name to its basis (hardware or group), its hardware
    description and its sorted hosts.
    """
    host_groups = host_groups or {}
    wanted = list(class_groups or ())
    host_class: dict[str, Optional[str]] = {}
    classes: dict[str, dict[str, Any]] = {}
    for host in sorted(facts_by_host):
        facts = facts_by_host[host]
        member_of = set(host_groups.get(host) or ())
        group = next((g for g in wanted if g in member_of), None)
        key = hardware_key(facts)
        if group is not None:
            name, basis = group, GROUP
        elif key is not None:
            name, basis = class_name(key), HARDWARE
        else:
            host_class[host] = None
            continue
        host_class[host] = name
        info = classes.get(name)
        if info is None:
            info = classes[name] = {"basis": basis, "hosts": [], "gpu_vendor": None, "gpu_model": None, "gpu_count": None,
                                    "cpu_model": None, "memory_gib": None}
            if facts is not None and basis == HARDWARE:
                info.update(gpu_vendor=facts.get("gpu_vendor"), gpu_model=facts["gpu_model"], gpu_count=facts["gpu_count"],
                            cpu_model=facts["cpu_model"], memory_gib=memory_bucket_gib(facts["memory_total_bytes"]))
        info["hosts"].append(host)
    return host_class, dict((name, classes[name]) for name in sorted(classes))


def count_peer_groups(facts_by_host: Mapping[str, Facts], host_class: Mapping[str, Optional[str]],
                      classes: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The group each host's GPU count is judged in: its class, or for automatic classes (which split on
    GPU count, so a host that lost a GPU would be alone) the hosts of the same GPU model, CPU and memory."""
    peers: dict[str, str] = {}
    for host, name in host_class.items():
        if name is None:
            continue
        if classes[name]["basis"] == GROUP:
            peers[host] = "class:" + name
        else:
            peers[host] = "family:" + class_name(family_key(facts_by_host[host]) or ())
    return peers

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""AMD GPUs from sysfs, without any ROCm tool: the PCI functions, the amdgpu module, the KFD topology, and one
GPU record per ``/sys/class/drm/cardN/device`` bound to amdgpu (the last fallback after amd-smi and rocm-smi).

- PCI: vendor 0x1002 with class 0x03xx (VGA 0x0300, display 0x0380: MI210) or 0x12xx (processing accelerator:
  MI300X is not a VGA device). The HDMI audio function (0x0403) is left out.
- KFD (``/sys/class/kfd/kfd/topology/nodes/*/properties``): nodes with ``simd_count`` > 0 are the GPUs ROCm can use
  (CPU nodes have 0); a partitioned GPU is one node per partition.
- ``/sys/module/amdgpu/version`` exists only with the ROCm-packaged (DKMS) driver; the in-box driver has none.
- Per card: link speed/width (current and max), ``pcie_replay_count``, ``gpu_busy_percent``, VRAM, hwmon
  temperatures with their ``_crit`` (slowdown) and ``_emergency`` (shutdown) limits, power and caps (micro-units),
  ``current_compute_partition``/``current_memory_partition``, ``ras/*_err_count`` ("ue: N"/"ce: N"/"de: N") and
  ``ras/gpu_vram_bad_pages`` ("pfn : size : R|P|F", R retired, P pending, F failed to reserve).

Every function takes the sysfs root so tests can lay a tree out under a temporary directory. Files are read with
_host/files.py (bounded reads).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import re
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text_or_none
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.amd_smi import (
    VENDOR,
    driver_identity,
    empty_record,
    finish,
    gen_of,
    number,
    set_temperatures,
    text,
)
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import Unreadable
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import AMD_VENDOR, pci_key, scan_amd_gpus

_CARD = re.compile(r"^card(\d+)$")
_COUNT = re.compile(r"^\s*(ue|ce|de)\s*:\s*(\S+)", re.MULTILINE)
_BAD_PAGE = re.compile(r"^\s*0x[0-9a-fA-F]+\s*:\s*0x[0-9a-fA-F]+\s*:\s*([RPF])\s*$", re.MULTILINE)
_SPEED = re.compile(r"([\d.]+)\s*GT/s")


def read_value(path: str) -> Optional[str]:
    """A sysfs file's value, stripped; None when it cannot be read (read_text_or_none)."""
    value = read_text_or_none(path)
    return value.strip() if value is not None else None


def scan_pci(root: str) -> list[dict[str, Any]]:
    """AMD GPU functions under ``<root>/sys/bus/pci/devices`` (_host/pci.scan_amd_gpus)."""
    return scan_amd_gpus(os.path.join(root, "sys/bus/pci/devices"))


def read_module(root: str) -> dict[str, Any]:
    """The amdgpu kernel module: {loaded, version (DKMS only), kind: "dkms" | "in-box" | None}."""
    base = os.path.join(root, "sys/module/amdgpu")
    if not os.path.isdir(base):
        return {"loaded": False, "version": None, "kind": None}
    version = read_value(os.path.join(base, "version"))
    return {"loaded": True, "version": version, "kind": "dkms" if version else "in-box"}


def parse_kfd_properties(content: str) -> dict[str, int]:
    """A KFD node's ``properties`` file ("simd_count 304\\nlocation_id 3072 ...") -> {name: int}."""
    out = {}
    for line in content.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                out[parts[0]] = int(parts[1])
            except ValueError:
                continue
    return out


def read_kfd(root: str) -> Optional[dict[str, Any]]:
    """The KFD topology's GPU nodes: {"gpu_nodes": N, "nodes": [{node, simd_count, gpu_id, pci key}]}; None
    when there is no KFD (amdgpu not loaded, or no ROCm-capable GPU)."""
    nodes_dir = os.path.join(root, "sys/class/kfd/kfd/topology/nodes")
    if not os.path.isdir(nodes_dir):
        return None
    nodes = []
    for name in sorted(os.listdir(nodes_dir), key=lambda n: int(n) if n.isdigit() else -1):
        content = read_value(os.path.join(nodes_dir, name, "properties"))
        if content is None:
            continue
        props = parse_kfd_properties(content)
        if props.get("simd_count", 0) <= 0:
            continue
        location = props.get("location_id")
        domain = props.get("domain", 0)
        pci = "%04x:%02x:%02x" % (domain, location >> 8, (location >> 3) & 0x1f) if location is not None else None
        nodes.append({"node": name, "simd_count": props["simd_count"], "gpu_id": read_value(os.path.join(nodes_dir, name, "gpu_id")),
                      "pci": pci})
    return {"gpu_nodes": len(nodes), "nodes": nodes}


def parse_err_count(content: Optional[str]) -> dict[str, Any]:
    """``ras/<block>_err_count`` ("ue: 0\\nce: 3", newer kernels add "de: N") -> {uncorrectable, correctable, deferred}."""
    found = dict((kind, number(value)) for kind, value in _COUNT.findall(content or ""))
    return {"uncorrectable": found.get("ue"), "correctable": found.get("ce"), "deferred": found.get("de")}


def parse_bad_pages(content: Optional[str]) -> dict[str, Any]:
    """``ras/gpu_vram_bad_pages`` -> {retired, pending, unreservable} counts (R, P, F flags); all None when unread."""
    if content is None:
        return {"retired": None, "pending": None, "unreservable": None}
    flags = _BAD_PAGE.findall(content)
    return {"retired": flags.count("R"), "pending": flags.count("P"), "unreservable": flags.count("F")}


def read_device_extras(device: str) -> dict[str, Any]:
    """What sysfs adds to any tool's record of one GPU: bad pages, RAS counts per block, replay count, partitions."""
    ras = os.path.join(device, "ras")
    blocks = {}
    if os.path.isdir(ras):
        for name in sorted(os.listdir(ras)):
            if name.endswith("_err_count"):
                blocks[name[:-len("_err_count")].upper()] = parse_err_count(read_value(os.path.join(ras, name)))
    return {
        "bad_pages": parse_bad_pages(read_value(os.path.join(ras, "gpu_vram_bad_pages"))),
        "ras_blocks": blocks,
        "pcie_replay_count": number(read_value(os.path.join(device, "pcie_replay_count"))),
        "compute_partition": text(read_value(os.path.join(device, "current_compute_partition"))),
        "memory_partition": text(read_value(os.path.join(device, "current_memory_partition"))),
    }


def device_dirs(root: str) -> dict[str, str]:
    """pci key -> ``/sys/class/drm/cardN/device`` of each amdgpu card (the first card of a shared address)."""
    drm = os.path.join(root, "sys/class/drm")
    found: dict[str, str] = {}
    if not os.path.isdir(drm):
        return found
    for name in sorted(os.listdir(drm), key=lambda n: int(n[4:]) if _CARD.match(n) else -1):
        if not _CARD.match(name):
            continue
        device = os.path.join(drm, name, "device")
        if read_value(os.path.join(device, "vendor")) != AMD_VENDOR:
            continue
        key = pci_key(os.path.basename(os.path.realpath(device)))
        if key and key not in found:
            found[key] = device
    return found


def _hwmon(device: str) -> Optional[str]:
    base = os.path.join(device, "hwmon")
    if not os.path.isdir(base):
        return None
    names = sorted(os.listdir(base))
    return os.path.join(base, names[0]) if names else None


def _milli(path: str, scale: float) -> Any:
    value = number(read_value(path))
    return value / scale if isinstance(value, (int, float)) else value


def _speed(raw: Optional[str]) -> Any:
    if raw is None:
        return None
    match = _SPEED.search(raw)
    return float(match.group(1)) if match else (None if raw.lower().startswith("unknown") else Unreadable(raw))


def read_gpus(root: str = "/") -> dict[str, Any]:
    """One record per amdgpu card from sysfs; {"vendor", "source": "sysfs", "driver_version", "gpus", ...}."""
    module = read_module(root)
    gpus = []
    for index, (key, device) in enumerate(sorted(device_dirs(root).items())):
        gpus.append(_card(index, key, device))
    version, kind, _kernel = driver_identity(module["version"]) if module["version"] else (None, module["kind"], None)
    return {"vendor": VENDOR, "source": "sysfs", "driver_version": version, "driver_kind": kind or module["kind"],
            "kernel_release": None, "gpus": gpus, "unreadable": {}, "problems": []}


def _card(index: int, key: str, device: str) -> dict[str, Any]:
    record = empty_record(index)
    address = os.path.basename(os.path.realpath(device))
    record.update(pci_bus_id=address if pci_key(address) else key,
                  uuid=text(read_value(os.path.join(device, "unique_id"))),
                  name=text(read_value(os.path.join(device, "product_name"))) or "AMD GPU %s" % read_value(os.path.join(device, "device")),
                  serial=text(read_value(os.path.join(device, "serial_number"))),
                  vbios_version=text(read_value(os.path.join(device, "vbios_version"))),
                  performance_state=text(read_value(os.path.join(device, "power_dpm_force_performance_level"))))
    record["pcie"].update(
        gen_current=gen_of(_speed(read_value(os.path.join(device, "current_link_speed")))),
        gen_max=gen_of(_speed(read_value(os.path.join(device, "max_link_speed")))),
        width_current=number(read_value(os.path.join(device, "current_link_width"))),
        width_max=number(read_value(os.path.join(device, "max_link_width"))),
    )
    record["utilization"]["gpu_pct"] = number(read_value(os.path.join(device, "gpu_busy_percent")))
    total, used = number(read_value(os.path.join(device, "mem_info_vram_total"))), number(read_value(os.path.join(device, "mem_info_vram_used")))
    record["memory"] = {"total_mib": total // 1048576 if isinstance(total, int) else total,
                        "used_mib": used // 1048576 if isinstance(used, int) else used}
    hwmon = _hwmon(device)
    if hwmon:
        sensors: dict[str, Any] = {}
        limits: dict[str, Any] = {}
        for position in (1, 2, 3):
            label = (read_value(os.path.join(hwmon, "temp%d_label" % position)) or "").lower()
            name = {"edge": "edge", "junction": "hotspot", "mem": "vram"}.get(label)
            if name is None:
                continue
            sensors[name] = _milli(os.path.join(hwmon, "temp%d_input" % position), 1000.0)
            crit = _milli(os.path.join(hwmon, "temp%d_crit" % position), 1000.0)
            emergency = _milli(os.path.join(hwmon, "temp%d_emergency" % position), 1000.0)
            limits["slowdown_" + name] = crit if not isinstance(crit, Unreadable) else None
            limits["shutdown_" + name] = emergency if not isinstance(emergency, Unreadable) else None
        set_temperatures(record["temperature"], sensors.get("edge"), sensors.get("hotspot"), sensors.get("vram"), limits)
        draw = _milli(os.path.join(hwmon, "power1_average"), 1e6)
        if draw is None:
            draw = _milli(os.path.join(hwmon, "power1_input"), 1e6)
        record["power"].update(draw_w=draw, limit_w=_milli(os.path.join(hwmon, "power1_cap"), 1e6),
                               default_limit_w=_milli(os.path.join(hwmon, "power1_cap_default"), 1e6),
                               min_limit_w=_milli(os.path.join(hwmon, "power1_cap_min"), 1e6),
                               max_limit_w=_milli(os.path.join(hwmon, "power1_cap_max"), 1e6))
        sclk = _milli(os.path.join(hwmon, "freq1_input"), 1e6)
        record["clocks"].update(graphics_mhz=sclk, sm_mhz=sclk)
    extras = read_device_extras(device)
    record["pcie"]["replay_counter"] = extras["pcie_replay_count"]
    record["partition"].update(compute=extras["compute_partition"], memory=extras["memory_partition"])
    apply_extras(record, extras)
    return finish(record)


def apply_extras(record: dict[str, Any], extras: dict[str, Any]) -> None:
    """Bad pages and per-block RAS counts from sysfs into a record (any source); ECC counts where a tool gave none.

    Only blocks sysfs lists exist (the driver lists the blocks whose RAS is enabled), so their counts are judged.
    """
    threshold = record["bad_pages"].get("threshold")
    record["bad_pages"] = dict(extras["bad_pages"], threshold=threshold)
    blocks = extras["ras_blocks"]
    if not blocks:
        return
    for block, counts in blocks.items():
        record["ras_blocks"].setdefault(block, dict(counts, enabled=True))

    def total(kind: str) -> Any:
        values = [c[kind] for c in blocks.values() if c[kind] is not None]
        broken = [v for v in values if isinstance(v, Unreadable)]
        return broken[0] if broken else (sum(values) if values else None)
    volatile = record["ecc"]["volatile"]
    memory = blocks.get("UMC") or {}
    record["ecc"]["current"] = "Enabled"
    if volatile["uncorrectable"] is None and volatile["correctable"] is None:
        volatile.update(correctable=total("correctable"), uncorrectable=total("uncorrectable"),
                        deferred=total("deferred"), dram_correctable=memory.get("correctable"),
                        dram_uncorrectable=memory.get("uncorrectable"))
        return
    # Both read: an error counted by either is counted (the tool and sysfs read the same driver counters).
    for kind, dram in (("correctable", "dram_correctable"), ("uncorrectable", "dram_uncorrectable"), ("deferred", None)):
        found = total(kind)
        if isinstance(found, int) and isinstance(volatile[kind], int) and found > volatile[kind]:
            volatile[kind] = found
        if dram and isinstance(memory.get(kind), int) and not isinstance(volatile[dram], int):
            volatile[dram] = memory[kind]

"""GPU readers, one per vendor tool, all returning the same GPU record shape.

Readers: nvidia_smi.py (``nvidia-smi -q -x``; find_nvidia_smi() is the one meaning of ``nvidia_smi_path``: the
path of the binary, None to look it up on PATH), nvml.py (an NVML session through pynvml). AMD: amd_smi.py
(``amd-smi list/static/metric --json``), rocm_smi.py (``rocm-smi --showallinfo --json``) and amd_sysfs.py
(/sys/class/drm/card*/device, the amdgpu module, KFD topology, PCI) return the same shapes, with None wherever
their tool has no such value (docs/amd.md).

A GPU inventory (``nvidia_smi.read_gpus``)::

    {"driver_version": str|None, "cuda_version": str|None, "attached_gpus": int|None, "timestamp": str|None,
     "gpus": [GPU record, ...], "unreadable": {field: raw text}}

An AMD inventory has {"vendor": "amd", "source": "amd-smi" | "rocm-smi" | "sysfs", "driver_version" (the DKMS
amdgpu version, None for the in-box driver), "driver_kind" ("dkms" | "in-box"), "kernel_release", "gpus",
"unreadable", "problems": [text]}; the doctor probe adds "pci_gpus", "kernel_module", "kfd".

A GPU record (numbers carry no unit text). Every value is read by one reader (``nvidia_smi.read_value``) that
tells three cases apart: a value; absent by design ("N/A", "Not Supported", "Not Available", deprecated): None;
unreadable (an NVML error string such as "Unknown Error", "GPU is lost", "[GPU requires reset]", "Insufficient
Permissions", "ERR!", "[Not Found]"; text where a number belongs; a number beyond 2**64, NaN or infinite): None as
well, and listed in ``unreadable`` so that checks never mistake it for "nothing to read"::

    vendor                str      "nvidia" or "amd"
    index                 int      order in the tool's listing (0-based)
    pci_bus_id            str      as the tool writes it; compare with _host.pci.pci_key()
    uuid, name, brand, architecture, serial, vbios_version, persistence_mode, performance_state: str|None
    mig                   {current, pending: str|None, instances: int}
    pcie                  {gen_current, gen_max, gen_device_max, gen_host_max, width_current, width_max,
                           replay_counter, replay_rollover_counter: number|None}
    clock_event_reasons   {reason: bool}   (what slows the clocks now: thermal, power cap, ...)
    utilization           {gpu_pct, memory_pct}
    memory                {total_mib, used_mib}
    ecc                   {current, pending: str|None, volatile, aggregate: {correctable, uncorrectable,
                           dram_correctable, dram_uncorrectable, sram_correctable, sram_uncorrectable},
                           sram_threshold_exceeded: bool|None}   with MIG enabled under driver 510 (DTD v11) the
                          GPU's volatile counts read N/A: SRAM uncorrectable is then the sum of its MIG devices' counts
    retired_pages         {single_bit, double_bit: int|None, pending: bool|None}
    repair                {channel_pending, tpc_pending, unrepairable_memory: bool|None}   DTD v13: a memory channel
                          or TPC repair waiting for a GPU reset; memory errors no repair can fix
    remapped_rows         None (no row remapper) | {correctable, uncorrectable, pending, failure, histogram}
    temperature           {gpu_c, memory_c, shutdown_c, slowdown_c, max_operating_c, memory_max_c, tlimit_c,
                           shutdown_tlimit_c, slowdown_tlimit_c, max_operating_tlimit_c: number|None}
    power                 {draw_w, limit_w, default_limit_w, min_limit_w, max_limit_w: number|None}
    clocks, max_clocks, applications_clocks, default_applications_clocks
                          {graphics_mhz, sm_mhz, memory_mhz: number|None}
    fabric                {state, status (NVML's result: Success, or an error string), cluster_uuid, health_summary,
                           bandwidth, incorrect_configuration: str|None; clique_id: int|None; route_recovery,
                           route_unhealthy, access_timeout_recovery: bool|None}
    virtualization_mode   str|None  None (bare metal), Pass-Through, VGPU (a vGPU guest: its temperatures and clocks
                                    are placeholders such as 0 C / 0 MHz), Host VGPU
    vgpu_license          str|None  NVIDIA vGPU software license state (vGPU guests, GRID drivers): Licensed (Expiry: ...),
                                    Unlicensed (Unrestricted) in its grace period, Unlicensed (Restricted); None elsewhere
    recovery              {action: str|None   gpu_recovery_action (DTD v13, driver 570+): None, Reset, Reboot,
                                              Drain P2P, Drain and Reset
                           reset_required, drain_and_reset_recommended: bool|None}   gpu_reset_status (DTD v12)
    AMD records only (None / empty where a tool does not say):
    temperature           also sensor ("hotspot" | "edge": which one gpu_c is), edge_c, hotspot_c; slowdown_c and
                          shutdown_c are that sensor's own limits, memory_max_c the VRAM slowdown limit
    ecc.volatile          also deferred (poisoned data, consumption deferred): counts since driver load, filled
                          only where ECC is enabled on some RAS block
    ras_blocks            {BLOCK: {enabled, correctable, uncorrectable, deferred}}  (UMC, GFX, XGMI_WAFL, ...)
    bad_pages             {retired, pending, unreservable, threshold: int|None}  (sysfs ras/gpu_vram_bad_pages,
                          static ras.bad_page_threshold)
    partition             {compute: SPX|DPX|QPX|CPX, memory: NPS1|NPS2|NPS4, id: int}  (MI300-class)
    xgmi                  {error_count: int|None, error_status: str|None}
    pcie.replay_growth    replays counted while the doctor probe read the GPU (sysfs, before and after the tools)
    clock_event_reasons   {"throttled": bool} from throttle_status
    unreadable            {record field path: raw text}   each value that could not be read, e.g.
                          {"temperature.gpu_c": "Unknown Error", "pcie.replay_counter": "value out of range (9999...)"};
                          the field itself is None. Empty when everything read.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
from collections.abc import Mapping
from typing import Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host import command
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import scan_amd_gpus

# ROCm installs its tools under /opt/rocm/bin (a link to /opt/rocm-<version>) or $ROCM_PATH/bin, and does not always
# link them into /usr/bin (ROCm/legacy-rocm-build#25; "amd-smi: command not found" until /opt/rocm/bin is searched,
# jurkovic-nikola/OpenLinkHub#156).
ROCM_DIRS = ("/opt/rocm",)
ROCM_TOOL_PLACES = "on PATH, in $ROCM_PATH/bin or /opt/rocm/bin"


def find_rocm_tool(name: str, environ: Optional[Mapping[str, str]] = None, override: Optional[str] = None) -> Optional[str]:
    """Absolute path of a ROCm tool (amd-smi, rocm-smi, rvs): an explicit ``override`` alone when given (None when it
    cannot run), else PATH first, then $ROCM_PATH/bin and /opt/rocm/bin."""
    path = command.find_binary(name, override)
    if path or override:
        return path
    environ = os.environ if environ is None else environ
    for base in ([environ["ROCM_PATH"]] if environ.get("ROCM_PATH") else []) + list(ROCM_DIRS):
        candidate = os.path.join(base, "bin", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def amd_evidence(root: str = "/") -> Optional[str]:
    """What shows this host has AMD GPUs (a short phrase: amd-smi or rocm-smi found, an AMD GPU on the PCI bus, the
    amdgpu module loaded), None when nothing does."""
    for tool in ("amd-smi", "rocm-smi"):
        path = find_rocm_tool(tool)
        if path:
            return "%s at %s" % (tool, path)
    if scan_amd_gpus(os.path.join(root, "sys/bus/pci/devices")):
        return "an AMD GPU on the PCI bus"
    if os.path.isdir(os.path.join(root, "sys/module/amdgpu")):
        return "the amdgpu module loaded"
    return None


# An AMD GPU's compute partition mode -> the logical devices it shows per physical GPU (amd-smi, sysfs
# current_compute_partition): readers count physical GPUs with it, the partition check validates expectations.
PARTITION_DEVICES = {"SPX": 1, "DPX": 2, "TPX": 3, "QPX": 4, "CPX": 8}

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What holds a GPU below its speed: its PCIe link (width, generation, replays), clock event reasons,
temperature, power and clocks, each against the GPU's own limits unless hydra_expect says otherwise.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import amd as amd_checks
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.per_gpu import (
    GPU_PROBES,
    counted,
    gpu_detail,
    gpu_records,
    is_vgpu,
    vendor_gate,
    verdict,
    vgpu_skip,
    with_counts,
    with_unreadable,
)
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, PASS, WARN

PCIE_GEN = _expect.key("pcie_gen")
PCIE_WIDTH = _expect.key("pcie_width")
TEMPERATURE_WARN = _expect.key("temperature_warn_c")
BUSY_UTIL = _expect.key("gpu_busy_util_pct")
PCIE_REPLAY_WARN = _expect.key("pcie_replay_warn")

# A busy GPU below this share of its max SM clock, with no power cap to explain it, is held back.
BUSY_CLOCK_FLOOR = 0.6

# The record fields (dotted paths, or their prefixes) each check reads: its unreadable values among them
# make it ERROR (FAIL for a lost GPU).
_READS_PCIE_LINK = ("pcie.gen_current", "pcie.gen_max", "pcie.gen_device_max", "pcie.gen_host_max", "pcie.width_current",
                    "pcie.width_max", "utilization.gpu_pct")
_READS_PCIE_REPLAY = ("pcie.replay_counter", "pcie.replay_rollover_counter")
_READS_CLOCK_THROTTLE_REASONS = ("clock_event_reasons",)
_READS_TEMPERATURE = ("temperature",)
_READS_POWER = ("power",)
_READS_CLOCKS = ("clocks", "max_clocks", "applications_clocks", "default_applications_clocks", "utilization.gpu_pct")


def _busy(gpu: Mapping[str, Any], expect: Expect) -> bool:
    util = gpu["utilization"]["gpu_pct"]
    return util is not None and util >= _expect.get(expect, BUSY_UTIL)


@check("gpu.pcie_link", "PCIe link width and generation", uses=GPU_PROBES)
def pcie_link(probes: Probes, expect: Expect) -> Finding:
    """Reads each GPU's current and maximum PCIe link width and generation, and its utilization.

    A link below its width on a busy GPU (utilization at or above `gpu_busy_util_pct`, default
    10 %) is a FAIL; on an idle GPU a WARN "re-check under load": links may narrow at idle and a
    slot may be narrower than the card (the healthy T4 and A10G recordings show x8 of x16). A
    lowered generation on an idle GPU is power saving and passes; under load it is a FAIL. With
    `pcie_width` / `pcie_gen` expected, those are the targets instead of the GPU's maxima.
    Unreadable values among what it reads (an NVML error string such as Unknown Error, text
    where a number belongs, a number out of range) are an ERROR naming the GPU and field, a FAIL
    with a reset/reboot remediation when they say the GPU is lost or requires a reset; a GPU
    with nothing readable is not judged, and SKIP says "nothing readable" when no GPU is.

    AMD GPUs: amd-smi metric pcie width/speed (or rocm-smi's pcie clock level, or sysfs) against
    static bus maxima, judged the same way.

    Remediation: reseat the GPU or riser and check the slot; set hydra_expect.pcie_width when the
    slot is narrower by design.
    """
    gate = vendor_gate(probes)
    if gate:
        return gate
    want_width, want_gen = _expect.get(expect, PCIE_WIDTH), _expect.get(expect, PCIE_GEN)
    results = []
    gpus = gpu_records(probes)
    for gpu in gpus:
        link = gpu["pcie"]
        width, gen = link["width_current"], link["gen_current"]
        target_width = want_width or link["width_max"]
        target_gen = want_gen or link["gen_max"] or (
            min(link["gen_device_max"], link["gen_host_max"]) if link["gen_device_max"] and link["gen_host_max"] else None)
        if width is None and gen is None:
            continue
        busy = _busy(gpu, expect)
        load = "busy (%s %%)" % gpu["utilization"]["gpu_pct"] if busy else "idle"
        detail = gpu_detail(gpu, width=width, target_width=target_width, gen=gen, target_gen=target_gen,
                            utilization_pct=gpu["utilization"]["gpu_pct"])
        narrow = width is not None and target_width is not None and width < target_width
        slow = gen is not None and target_gen is not None and gen < target_gen
        if narrow and busy:
            results.append((FAIL, detail, "x%s of x%s while %s" % (width, target_width, load)))
        elif slow and busy:
            results.append((FAIL, detail, "PCIe gen %s of %s while %s" % (gen, target_gen, load)))
        elif narrow:
            results.append((WARN, detail, "x%s of x%s at idle: re-check under load" % (width, target_width)))
        else:
            results.append((PASS, detail, "x%s gen %s" % (width, gen)))
    return verdict(with_unreadable(results, gpus, _READS_PCIE_LINK),
                   "PCIe links at full width on %d GPU(s) (generation judged under load only)" % len(results),
                   {FAIL: "Reseat the GPU or riser and check the slot; if the slot is narrower by design set "
                    "hydra_expect.pcie_width (or pcie_gen).",
                    WARN: "Re-run doctor while the GPU is busy; if the link stays narrow, reseat the card, or set "
                    "hydra_expect.pcie_width when the slot is x8 by design."},
                   skip_message="no GPU reports its PCIe link")


@check("gpu.pcie_replay", "PCIe replays", uses=GPU_PROBES)
def pcie_replay(probes: Probes, expect: Expect) -> Finding:
    """Reads each GPU's PCIe replay counter and replay rollover counter (since driver load).

    WARN when replays exceed `pcie_replay_warn` (default 100) or the counter rolled over: the
    link retransmits corrupted packets (signal integrity: riser, slot, cable). PASS otherwise.
    Unreadable values among what it reads (an NVML error string such as Unknown Error, text
    where a number belongs, a number out of range) are an ERROR naming the GPU and field, a FAIL
    with a reset/reboot remediation when they say the GPU is lost or requires a reset; a GPU
    with nothing readable is not judged, and SKIP says "nothing readable" when no GPU is.

    AMD GPUs: judged by growth, not by the count since driver load (healthy idle MI250 dies
    show thousands): WARN when sysfs pcie_replay_count grew while doctor read the GPU.

    Remediation: reseat the GPU, riser or retimer cable; compare with the other GPUs of the host.
    """
    gate = vendor_gate(probes)
    if gate:
        return gate
    threshold = _expect.get(expect, PCIE_REPLAY_WARN)
    results = []
    counts: list[dict[str, Any]] = []
    gpus = gpu_records(probes)
    for gpu in gpus:
        replays, rollovers = gpu["pcie"]["replay_counter"], gpu["pcie"]["replay_rollover_counter"]
        if replays is None:
            continue
        if gpu.get("vendor") == "amd":
            counted(counts, gpu, replays)
            results.append(amd_checks.replay_growth(gpu))
            continue
        detail = gpu_detail(gpu, replays=replays, rollovers=rollovers)
        counted(counts, gpu, replays)
        if rollovers:
            results.append((WARN, detail, "PCIe replay counter rolled over %d time(s)" % rollovers))
        elif replays > threshold:
            results.append((WARN, detail, "%d PCIe replays (over %d)" % (replays, threshold)))
        else:
            results.append((PASS, detail, "%d PCIe replays" % replays))
    found = verdict(with_unreadable(results, gpus, _READS_PCIE_REPLAY), "PCIe replays within %d on %d GPU(s)" % (threshold, len(results)),
                    "Reseat the GPU, riser or cable; a rising replay count means a marginal link.",
                    skip_message="no GPU reports PCIe replays")
    return with_counts(counts, found)


# The clock event reasons that are a WARN; the benign ones (idle, application clocks, power cap...) explain a clock.
_THERMAL_REASONS = ("hw_thermal_slowdown", "sw_thermal_slowdown")


@check("gpu.clock_throttle_reasons", "Clock throttle reasons", requires=("nvidia_smi",))
def clock_throttle_reasons(probes: Probes, expect: Expect) -> Finding:
    """Reads each GPU's active clock event (throttle) reasons.

    Idle, application-clock, display-clock, sync-boost and software power cap are benign (a GPU
    at its power limit under load is normal). Thermal slowdown (hardware or software) is a WARN:
    the usual cause is airflow or ambient temperature and it recovers when cooled. HW power
    brake, and HW slowdown not explained by a thermal reason, are a FAIL: they are asserted by
    the board or the system power supply, cut clocks by half or more and point at power
    delivery. SKIP when no reason is reported. Unreadable values among what it reads (an NVML
    error string such as Unknown Error, text where a number belongs, a number out of range) are
    an ERROR naming the GPU and field, a FAIL with a reset/reboot remediation when they say the
    GPU is lost or requires a reset; a GPU with nothing readable is not judged, and SKIP says
    "nothing readable" when no GPU is.

    Remediation: thermal: check fans, airflow and inlet temperature; power brake / HW slowdown:
    check the PSUs and power cabling, then reset the GPU.
    """
    results = []
    gpus = gpu_records(probes)
    for gpu in gpus:
        reasons = gpu["clock_event_reasons"]
        if all(on is None for on in reasons.values()):
            continue  # nothing readable: not judged
        active = sorted(reason for reason, on in reasons.items() if on)
        detail = gpu_detail(gpu, active_reasons=active)
        thermal = [r for r in active if r in _THERMAL_REASONS]
        brake = [r for r in active if r == "hw_power_brake_slowdown" or (r == "hw_slowdown" and "hw_thermal_slowdown" not in active)]
        if brake:
            results.append((FAIL, detail, "clocks held down by %s" % ", ".join(brake)))
        elif thermal:
            results.append((WARN, detail, "thermal slowdown active (%s)" % ", ".join(thermal)))
        else:
            results.append((PASS, detail, ", ".join(active) or "none active"))
    return verdict(with_unreadable(results, gpus, _READS_CLOCK_THROTTLE_REASONS), "no harmful clock throttle reason active on %d GPU(s)" % len(results),
                   {FAIL: "Check the power supplies and GPU power cabling (power brake / HW slowdown), then reset the GPU.",
                    WARN: "Check fans, airflow and inlet temperature; see gpu.temperature."},
                   skip_message="no GPU reports clock event reasons")


def _headroom(temp: Mapping[str, Any], limit_c: Optional[float], tlimit_threshold: Optional[float]) -> Optional[float]:
    """Degrees left below a limit, from absolute temperatures or from T.Limit values."""
    if temp["gpu_c"] is not None and limit_c is not None:
        return limit_c - temp["gpu_c"]
    if temp["tlimit_c"] is not None and tlimit_threshold is not None:
        return temp["tlimit_c"] - tlimit_threshold
    return None


@check("gpu.temperature", "GPU temperature", uses=GPU_PROBES)
def temperature(probes: Probes, expect: Expect) -> Finding:
    """Reads each GPU's temperature against its own slowdown and maximum operating thresholds (or T.Limit margins).

    FAIL at or past the slowdown threshold (the hardware is cutting clocks); WARN at or past the
    maximum operating temperature, within 5 C of slowdown when no operating limit is reported,
    with memory at or past its maximum, or at or above `temperature_warn_c` when expected. PASS
    otherwise; SKIP when no temperature is reported. Unreadable values among what it reads (an
    NVML error string such as Unknown Error, text where a number belongs, a number out of range)
    are an ERROR naming the GPU and field, a FAIL with a reset/reboot remediation when they say
    the GPU is lost or requires a reset; a GPU with nothing readable is not judged, and SKIP
    says "nothing readable" when no GPU is. GPUs of a vGPU guest (virtualization mode VGPU) are
    SKIP: their values are placeholders (0 C, 0 MHz).

    AMD GPUs: the hotspot (junction) sensor where reported, else the edge, against the
    device's own slowdown and shutdown limits for that sensor; memory against its slowdown limit.

    Remediation: check fans, airflow, blanking panels and inlet temperature; move load off the GPU
    until it cools.
    """
    gate = vendor_gate(probes)
    if gate:
        return gate
    warn_at = _expect.get(expect, TEMPERATURE_WARN)
    results = []
    gpus = gpu_records(probes)
    for gpu in gpus:
        if is_vgpu(gpu):
            results.append(vgpu_skip(gpu))
            continue
        temp = gpu["temperature"]
        if temp["gpu_c"] is None and temp["tlimit_c"] is None:
            continue
        to_slowdown = _headroom(temp, temp["slowdown_c"], temp["slowdown_tlimit_c"])
        to_max = _headroom(temp, temp["max_operating_c"], temp["max_operating_tlimit_c"])
        detail = gpu_detail(gpu, temperature_c=temp["gpu_c"], memory_c=temp["memory_c"], to_slowdown_c=to_slowdown,
                            to_max_operating_c=to_max)
        shown = "%s C" % temp["gpu_c"] if temp["gpu_c"] is not None else "T.Limit %s C" % temp["tlimit_c"]
        if to_slowdown is not None and to_slowdown <= 0:
            results.append((FAIL, detail, "%s: at its slowdown threshold" % shown))
        elif to_max is not None and to_max <= 0:
            results.append((WARN, detail, "%s: past its maximum operating temperature" % shown))
        elif to_max is None and to_slowdown is not None and to_slowdown <= 5:
            results.append((WARN, detail, "%s: %s C below slowdown" % (shown, to_slowdown)))
        elif temp["memory_c"] is not None and temp["memory_max_c"] is not None and temp["memory_c"] >= temp["memory_max_c"]:
            results.append((WARN, detail, "memory %s C at its maximum %s C" % (temp["memory_c"], temp["memory_max_c"])))
        elif warn_at is not None and temp["gpu_c"] is not None and temp["gpu_c"] >= warn_at:
            results.append((WARN, detail, "%s, at or above temperature_warn_c %s" % (shown, warn_at)))
        else:
            results.append((PASS, detail, shown))
    return verdict(with_unreadable(results, gpus, _READS_TEMPERATURE), "temperatures below their limits on %d GPU(s)" % len(results),
                   "Check fans, airflow, blanking panels and inlet temperature; move load off the GPU until it cools.",
                   skip_message="no GPU reports a temperature")


@check("gpu.power", "Power limit", uses=GPU_PROBES)
def power(probes: Probes, expect: Expect) -> Finding:
    """Reads each GPU's power draw, enforced power limit and default power limit.

    WARN "power capped" when the enforced limit is below the default (someone ran `nvidia-smi
    -pl` or a platform cap applies): the GPU cannot reach its rated performance. PASS otherwise
    (a GPU drawing up to its limit under load is normal); SKIP when no limit is reported.
    Unreadable values among what it reads (an NVML error string such as Unknown Error, text
    where a number belongs, a number out of range) are an ERROR naming the GPU and field, a FAIL
    with a reset/reboot remediation when they say the GPU is lost or requires a reset; a GPU
    with nothing readable is not judged, and SKIP says "nothing readable" when no GPU is. GPUs
    of a vGPU guest (virtualization mode VGPU) are SKIP: their values are placeholders (0 C, 0
    MHz).

    AMD GPUs: socket power against the power cap (a cap below the default read from
    sysfs power1_cap_default is a WARN).

    Remediation: restore the default with `nvidia-smi -pl <default watts> -i <index>` unless the
    cap is intended.
    """
    gate = vendor_gate(probes)
    if gate:
        return gate
    results = []
    gpus = gpu_records(probes)
    for gpu in gpus:
        if is_vgpu(gpu):
            results.append(vgpu_skip(gpu))
            continue
        watts = gpu["power"]
        if watts["limit_w"] is None:
            continue
        detail = gpu_detail(gpu, draw_w=watts["draw_w"], limit_w=watts["limit_w"], default_limit_w=watts["default_limit_w"])
        if watts["default_limit_w"] is not None and watts["limit_w"] < watts["default_limit_w"] - 0.5:
            results.append((WARN, detail, "power capped: limit %s W below the default %s W" % (
                watts["limit_w"], watts["default_limit_w"])))
        else:
            results.append((PASS, detail, "%s of %s W" % (watts["draw_w"], watts["limit_w"])))
    return verdict(with_unreadable(results, gpus, _READS_POWER), "power limits at their defaults on %d GPU(s)" % len(results),
                   "Restore the default limit with `nvidia-smi -pl <default watts> -i <index>` (or the "
                   "continuum.hydra.gpu_settings role) unless the cap is intended.",
                   skip_message="no GPU reports a power limit")


@check("gpu.clocks", "Clocks", uses=GPU_PROBES)
def clocks(probes: Probes, expect: Expect) -> Finding:
    """Reads each GPU's SM clock against its maximum, and its application clocks against their defaults.

    WARN when application clocks were lowered below the default application clocks (`nvidia-smi
    -ac`); defaults below the boost maximum are NVIDIA's and pass (T4: 585 of 1590 MHz, A100:
    1275 of 1410 MHz in the recordings). WARN when a busy GPU (see `gpu_busy_util_pct`) runs its
    SM clock below 60 % of the maximum with no power cap to explain it. PASS otherwise; SKIP
    when no clock is reported. Unreadable values among what it reads (an NVML error string such
    as Unknown Error, text where a number belongs, a number out of range) are an ERROR naming
    the GPU and field, a FAIL with a reset/reboot remediation when they say the GPU is lost or
    requires a reset; a GPU with nothing readable is not judged, and SKIP says "nothing
    readable" when no GPU is. GPUs of a vGPU guest (virtualization mode VGPU) are SKIP: their
    values are placeholders (0 C, 0 MHz).

    AMD GPUs: the gfx clock against its maximum (amd-smi, rocm-smi's valid sclk range).

    Remediation: reset application clocks with `nvidia-smi -rac`; for a slow busy GPU read
    gpu.clock_throttle_reasons and gpu.temperature.
    """
    gate = vendor_gate(probes)
    if gate:
        return gate
    results = []
    gpus = gpu_records(probes)
    for gpu in gpus:
        if is_vgpu(gpu):
            results.append(vgpu_skip(gpu))
            continue
        current, top = gpu["clocks"]["sm_mhz"], gpu["max_clocks"]["sm_mhz"]
        app, default = gpu["applications_clocks"]["graphics_mhz"], gpu["default_applications_clocks"]["graphics_mhz"]
        if current is None and app is None:
            continue
        detail = gpu_detail(gpu, sm_mhz=current, max_sm_mhz=top, application_mhz=app, default_application_mhz=default)
        power_bound = gpu["clock_event_reasons"].get("sw_power_cap")
        if app is not None and default is not None and app < default:
            results.append((WARN, detail, "application clocks lowered to %s of the default %s MHz" % (app, default)))
        elif _busy(gpu, expect) and current and top and current < BUSY_CLOCK_FLOOR * top and not power_bound:
            results.append((WARN, detail, "SM clock %s of %s MHz while busy (%s %%)" % (
                current, top, gpu["utilization"]["gpu_pct"])))
        else:
            results.append((PASS, detail, "SM %s of %s MHz" % (current, top)))
    return verdict(with_unreadable(results, gpus, _READS_CLOCKS), "clocks as configured on %d GPU(s)" % len(results),
                   "Reset application clocks with `nvidia-smi -rac -i <index>`; for a slow busy GPU read "
                   "gpu.clock_throttle_reasons and gpu.temperature.",
                   skip_message="no GPU reports clocks")

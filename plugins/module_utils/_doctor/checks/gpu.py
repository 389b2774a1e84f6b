# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU and driver checks: pure functions of the nvidia-smi, NVML, PCI, kernel module, kernel log,
NVLink and Fabric Manager probes.

Every check judges each GPU against its own hardware limits (the maxima and
thresholds nvidia-smi reports) unless hydra_expect says otherwise, and names
the GPUs it is not happy with in details.gpus.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import math
import re
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional, Union

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import amd as amd_checks
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import events, xid_table
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import OUT_OF_RANGE, is_lost
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import pci_key
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding, gpu_ref
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS, READ_ABSENT, READ_FAILED, READ_OK, SKIP, WARN, severity, worst

GPU_COUNT = _expect.key("gpu_count")
GPU_MODEL = _expect.key("gpu_model")
DRIVER_MIN = _expect.key("driver_min")
DRIVER_MAX = _expect.key("driver_max")
CUDA_MIN = _expect.key("cuda_min")
PCIE_GEN = _expect.key("pcie_gen")
PCIE_WIDTH = _expect.key("pcie_width")
ECC_MODE = _expect.key("ecc_mode")
MIG_MODE = _expect.key("mig_mode")
PERSISTENCE_MODE = _expect.key("persistence_mode")
ECC_CORRECTABLE_WARN = _expect.key("ecc_correctable_warn")
TEMPERATURE_WARN = _expect.key("temperature_warn_c")
# Read by the kernel_log probe (it fetches only the window), declared here with the check that uses it.
XID_WINDOW = _expect.key("xid_window_hours")
# Read by the fabric_manager probe, declared here with the check that uses it.
FABRIC_MANAGER_LOG = _expect.key("fabric_manager_log")
BUSY_UTIL = _expect.key("gpu_busy_util_pct")
PCIE_REPLAY_WARN = _expect.key("pcie_replay_warn")
ROW_REMAP_UNC_WARN = _expect.key("row_remap_uncorrectable_warn")
RETIRED_DBE_FAIL = _expect.key("retired_pages_dbe_fail")

MODES = ("enabled", "disabled")
# DCGM's limit on retired pages per GPU (dcgm_gpu_hardware_limits.h): beyond it the GPU is to be replaced.
RETIRED_PAGES_LIMIT = 60
# A busy GPU below this share of its max SM clock, with no power cap to explain it, is held back.
BUSY_CLOCK_FLOOR = 0.6

RESET_OR_DRAIN = "Drain the node, reset the GPU (`nvidia-smi -r -i <index>` with no processes on it) or reboot"


# ---------------------------------------------------------------- helpers


# The vendor GPU probes: the checks both vendors share (uses=GPU_PROBES) judge the records of each one with data.
GPU_PROBES = ("nvidia_smi", "amd_smi")


def _gpus(probes: Probes) -> list[dict[str, Any]]:
    """The GPU records of every vendor probe with data, each number beyond range (non-finite, or past 2**64)
    replaced by None and named in ``unreadable`` as "value out of range", so that no check compares or formats it."""
    return [_in_range(gpu) for name in GPU_PROBES if (probes.get(name) or {}).get("status") == READ_OK
            for gpu in probes[name]["data"]["gpus"]]


def _vendor_gate(probes: Probes) -> Optional[Finding]:
    """The registry's gate for a check reading either vendor's GPUs: None (judge) when a vendor probe has data;
    ERROR naming the failed probe when none has (the registry turns it into SKIP blocked by that probe's root
    check); SKIP with nvidia-smi's reason when neither vendor is on the host. A vendor probe that failed beside
    one with data is reported by its root check (driver.nvidia_smi, driver.amd_smi)."""
    envelopes = [(name, probes[name]) for name in GPU_PROBES if name in probes]
    if any(envelope["status"] == READ_OK for _name, envelope in envelopes):
        return None
    for name, envelope in envelopes:
        if envelope["status"] == READ_FAILED:
            return finding(ERROR, "probe %s failed: %s" % (name, envelope["reason"]))
    return finding(SKIP, envelopes[0][1]["reason"])


def _vendor(probes: Probes) -> dict[str, Any]:
    """One envelope over the vendor probes (gpu.model, driver.version): NVIDIA's unless only AMD has data; an OK
    pair is merged (the GPUs of both, NVIDIA's driver fields)."""
    smi, amd = probes["nvidia_smi"], probes.get("amd_smi") or {"status": READ_ABSENT}
    if smi["status"] == READ_ABSENT and amd["status"] != READ_ABSENT:
        return dict(amd, tool="amd-smi")
    if amd["status"] != READ_OK or smi["status"] == READ_FAILED:
        return smi
    if smi["status"] != READ_OK:
        return dict(amd, tool="amd-smi")
    return dict(smi, data=dict(smi["data"], gpus=smi["data"]["gpus"] + amd["data"]["gpus"]))


_RANGE = float(2 ** 64)


def _in_range(gpu: Mapping[str, Any]) -> dict[str, Any]:
    found: dict[str, str] = {}
    clean = _replace_out_of_range(gpu, "", found)
    if found:
        clean["unreadable"] = dict(gpu.get("unreadable") or {}, **found)
    return clean


def _replace_out_of_range(value: Any, path: str, found: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return dict((key, item if key == "unreadable" and not path else
                     _replace_out_of_range(item, "%s.%s" % (path, key) if path else key, found))
                    for key, item in value.items())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            fine = math.isfinite(value) and -_RANGE <= value <= _RANGE
        except OverflowError:
            fine = False
        if not fine:
            shown = "%r" % value if isinstance(value, float) else "an integer of %d bits" % value.bit_length()
            found[path] = "%s (%s)" % (OUT_OF_RANGE, shown)
            return None
    return value


# The record fields (dotted paths, or their prefixes) each per-GPU check reads: its unreadable values among them
# make it ERROR (FAIL for a lost GPU).
_READS_PERSISTENCE_MODE = ("persistence_mode",)
_READS_ECC_MODE = ("ecc.current", "ecc.pending")
_READS_MIG = ("mig.current", "mig.pending")
_READS_ECC_ERRORS = ("ecc.volatile", "ecc.aggregate", "ecc.sram_threshold_exceeded")
_READS_ROW_REMAP = ("remapped_rows", "retired_pages")
_READS_PCIE_LINK = ("pcie.gen_current", "pcie.gen_max", "pcie.gen_device_max", "pcie.gen_host_max", "pcie.width_current",
                    "pcie.width_max", "utilization.gpu_pct")
_READS_PCIE_REPLAY = ("pcie.replay_counter", "pcie.replay_rollover_counter")
_READS_CLOCK_THROTTLE_REASONS = ("clock_event_reasons",)
_READS_TEMPERATURE = ("temperature",)
_READS_POWER = ("power",)
_READS_CLOCKS = ("clocks", "max_clocks", "applications_clocks", "default_applications_clocks", "utilization.gpu_pct")


# GPU-level advice for values that could not be read.
UNREADABLE_ADVICE = ("Run `nvidia-smi -q -i <index>` by hand: an unreadable value means the driver could not query the "
                     "GPU (permissions, a driver fault or a failing GPU); read the kernel log for Xids, then reset the "
                     "GPU or reboot if it persists.")
LOST_ADVICE = ("The GPU is lost or needs a reset: drain the node, then reset the GPU (`nvidia-smi -r -i <index>` with "
               "no processes on it) or reboot; if it does not come back, power-cycle the node and have the GPU serviced.")


def _unreadable_in(gpu: Mapping[str, Any], fields: Sequence[str]) -> dict[str, str]:
    """The GPU's unreadable values among the record fields (dotted paths or their prefixes) a check reads."""
    return dict((path, raw) for path, raw in sorted((gpu.get("unreadable") or {}).items())
                if any(path == field or path.startswith(field + ".") for field in fields))


def _describe(found: Mapping[str, str]) -> str:
    shown = ["%s: %s" % (path, raw) if raw.startswith(OUT_OF_RANGE) else "%s unreadable (%r)" % (path, raw)
             for path, raw in list(found.items())[:3]]
    return ", ".join(shown) + (" (and %d more)" % (len(found) - 3) if len(found) > 3 else "")


def _unreadable_result(gpu: Mapping[str, Any], found: Mapping[str, str]) -> "GpuResult":
    """FAIL when a value says the GPU is lost or needs a reset, else ERROR naming the fields."""
    lost = OrderedDict((path, raw) for path, raw in found.items() if is_lost(raw))
    detail = _detail(gpu, unreadable=dict(found))
    if lost:
        return FAIL, detail, "GPU lost or needing a reset: %s" % _describe(lost)
    return ERROR, detail, _describe(found)


def _with_unreadable(results: list["GpuResult"], gpus: Sequence[Mapping[str, Any]], fields: Sequence[str]) -> list["GpuResult"]:
    """results, with each GPU that has unreadable values among ``fields`` judged ERROR (FAIL when lost or needing
    a reset) unless its own result is worse; a GPU skipped for having nothing readable gets that result too."""
    by_index = dict((result[1].get("index"), position) for position, result in enumerate(results))
    out = list(results)
    for gpu in gpus:
        found = _unreadable_in(gpu, fields)
        if not found and _blank(gpu):
            found = {BLANK: "N/A"}
        if not found:
            continue
        broken = _unreadable_result(gpu, found)
        position = by_index.get(gpu["index"])
        if position is None:
            out.append(broken)
            continue
        status, detail, phrase = out[position]
        if status == SKIP:
            continue  # a vGPU guest's placeholders: nothing here is a reading
        if severity(status) >= severity(broken[0]):
            detail["unreadable"] = dict(found)
            out[position] = (status, detail, "%s; also %s" % (phrase, _describe(found)))
        else:
            merged = dict(detail)
            merged.update(broken[1])
            out[position] = (broken[0], merged, broken[2])
    return out


# A GPU nvidia-smi lists with not one reading (every value "N/A"): the driver cannot query it (fallen off the bus,
# not initialised). Each per-GPU check judges it as unreadable, so that it never leaves every check SKIP.
BLANK = "(every reading)"
_READINGS = ("persistence_mode", "performance_state", "pcie", "utilization", "memory", "ecc", "retired_pages",
             "remapped_rows", "temperature", "power", "clocks", "max_clocks", "clock_event_reasons")


def _blank(gpu: Mapping[str, Any]) -> bool:
    """Whether the GPU has no readable and no unreadable value among its readings (identity fields aside)."""
    def empty(value: Any) -> bool:
        if isinstance(value, dict):
            return all(empty(item) for item in value.values())
        if isinstance(value, (list, tuple)):
            return all(empty(item) for item in value)
        return value is None
    return not gpu.get("unreadable") and all(empty(gpu.get(key)) for key in _READINGS)


def _vgpu(gpu: Mapping[str, Any]) -> bool:
    """A vGPU guest: nvidia-smi shows placeholders (0 C, 0 MHz) where the host's readings would be."""
    return (gpu.get("virtualization_mode") or "").strip().lower() in ("vgpu", "vsga")


def _vgpu_skip(gpu: Mapping[str, Any]) -> "GpuResult":
    return SKIP, _detail(gpu, virtualization_mode=gpu.get("virtualization_mode")), \
        "vGPU guest (virtualization mode %s): its values are placeholders, judge them on the host" % gpu.get(
            "virtualization_mode")


def _detail(gpu: Mapping[str, Any], **values: Any) -> dict[str, Any]:
    out = gpu_ref(gpu)
    if gpu.get("vendor") == "amd":
        out["vendor"] = "amd"  # _verdict words the remediation for AMD GPUs (AMD_REMEDIATION)
    out.update(values)
    return out


# The shared checks' remediation names nvidia-smi; for AMD GPUs each command becomes its amd-smi equivalent (long
# options: amd-smi's short ones changed between ROCm releases), and NVIDIA-only advice is dropped.
AMD_REMEDIATION = (
    ("`nvidia-smi -r -i <index>`", "`amd-smi reset --gpureset --gpu <index>`"),
    ("`nvidia-smi -pl <default watts> -i <index>`", "`amd-smi set --gpu <index> --power-cap <default watts>`"),
    ("`nvidia-smi -rac -i <index>`", "`amd-smi reset --gpu <index> --clocks`"),
    ("`nvidia-smi -q -i <index>`", "`amd-smi metric --gpu <index>`"),
    ("read the kernel log for Xids", "read the kernel log for amdgpu errors (gpu.amdgpu_errors)"),
    (" (or the continuum.hydra.gpu_settings role)", ""),
    ("; clear a reviewed lifetime count with nvidia-smi -p 1.", "."),
)


def amd_remediation(text: Optional[str]) -> Optional[str]:
    """A remediation text with its NVIDIA commands replaced by the amd-smi equivalents."""
    for nvidia, amd in AMD_REMEDIATION:
        text = text.replace(nvidia, amd) if text else text
    return text


def _with_counts(counts: list[dict[str, Any]], found: Finding) -> Finding:
    """Every judged GPU's error count in details.counts_by_gpu (details.gpus names only the GPUs that are not
    PASS), so the fleet report can compare each GPU with its hardware class whatever the verdict."""
    if counts:
        found["details"]["counts_by_gpu"] = counts
    return found


def _counted(counts: list[dict[str, Any]], gpu: Mapping[str, Any], count: Optional[int]) -> None:
    if count is not None:
        counts.append(dict(gpu_ref(gpu), count=count))


def _label(detail: Mapping[str, Any]) -> str:
    """'GPU 2 (00000000:3B:00.0)'; 'GPU at 0000:3b:00' for an address nvidia-smi does not list."""
    index, address = detail.get("index"), detail.get("pci_bus_id")
    if index is None:
        return "GPU at %s" % address
    return "GPU %s (%s)" % (index, address) if address else "GPU %s" % index


GpuResult = tuple[str, dict[str, Any], str]  # (status, detail, phrase) of one GPU


def _verdict(results: Sequence[GpuResult], pass_message: str, remediation: Union[str, dict[str, str], None],
             skip_message: Optional[str] = None) -> Finding:
    """One finding from per-GPU results [(status, detail, phrase)]: the worst status, its GPUs named.

    remediation is a string, or a dict per status. Details list the GPUs that are not PASS,
    or every judged GPU when all pass.
    """
    skipped = [r for r in results if r[0] == SKIP]
    for result_status, detail, phrase in skipped:
        detail.update(status=result_status, problem=phrase)
    results = [r for r in results if r[0] != SKIP]
    if not results:
        if skipped:
            named = "; ".join("%s: %s" % (_label(result[1]), result[2]) for result in skipped[:3])
            more = " (and %d more)" % (len(skipped) - 3) if len(skipped) > 3 else ""
            return finding(SKIP, named + more, details={"gpus": [result[1] for result in skipped]})
        return finding(SKIP, "nothing readable: %s" % (skip_message or "no GPU reports what this check reads"))
    bad = [r for r in results if r[0] in (WARN, FAIL, ERROR)]
    if not bad:
        return finding(PASS, pass_message, details={"gpus": [result[1] for result in results + skipped]})
    status = worst(r[0] for r in bad)
    top = [r for r in bad if r[0] == status]
    named = "; ".join("%s: %s" % (_label(result[1]), result[2]) for result in top[:3])
    more = " (and %d more)" % (len(top) - 3) if len(top) > 3 else ""
    prefix = "%d of %d GPUs: " % (len(top), len(results)) if len(results) > 1 else ""
    for result_status, detail, phrase in bad:
        detail.update(status=result_status, problem=phrase)
    advice = remediation.get(status) if isinstance(remediation, dict) else remediation
    unreadable = [r[1]["unreadable"] for r in top if r[1].get("unreadable")]
    if unreadable:
        lost = any(is_lost(raw) for found in unreadable for raw in found.values())
        advice = " ".join(OrderedDict.fromkeys(a for a in (LOST_ADVICE if lost else UNREADABLE_ADVICE, advice) if a))
    amd = [r for r in top if r[1].get("vendor") == "amd"]
    if amd and advice and amd_remediation(advice) != advice:
        advice = amd_remediation(advice) if len(amd) == len(top) else "%s On the AMD GPUs: %s" % (advice, amd_remediation(advice))
    return finding(status, prefix + named + more, details={"gpus": [result[1] for result in bad]}, remediation=advice)


def _choice(expect: Expect, key: str, choices: Sequence[str] = MODES) -> tuple[Optional[str], Optional[Finding]]:
    """(lower-cased expectation or None, ERROR finding when the value is not one of choices)."""
    value = _expect.get(expect, key)
    if value is None:
        return None, None
    if value.strip().lower() not in choices:
        return None, finding(ERROR, "expect.%s: %r is not one of: %s" % (key, value, ", ".join(choices)),
                             remediation="Set hydra_expect.%s to one of: %s." % (key, ", ".join(choices)))
    return value.strip().lower(), None


_VERSION = re.compile(r"^\d+(\.\d+)*$")


def _version(text: Optional[str]) -> Optional[tuple[int, ...]]:
    """'535.104.05' -> (535, 104, 5); None for anything else."""
    text = (text or "").strip()
    return tuple(int(part) for part in text.split(".")) if _VERSION.match(text) else None


def _compare(left: tuple[int, ...], right: tuple[int, ...]) -> int:
    """-1, 0 or 1 comparing two version tuples part by part (missing parts count as 0)."""
    size = max(len(left), len(right))
    left, right = left + (0,) * (size - len(left)), right + (0,) * (size - len(right))
    return (left > right) - (left < right)


def _version_bounds(expect: Expect, *keys: str) -> tuple[dict[str, tuple[str, tuple[int, ...]]], Optional[Finding]]:
    """({key: (text, tuple)} of the version expectations given, ERROR finding naming a bad one or None)."""
    bounds = {}
    for key in keys:
        text = _expect.get(expect, key)
        if text is None:
            continue
        parsed = _version(text)
        if parsed is None:
            return {}, finding(ERROR, "expect.%s: %r is not a dotted version such as 535.104.05" % (key, text),
                               remediation="Quote the version in hydra_expect.%s, e.g. \"535.104.05\"." % key)
        bounds[key] = (text, parsed)
    return bounds, None


def _busy(gpu: Mapping[str, Any], expect: Expect) -> bool:
    util = gpu["utilization"]["gpu_pct"]
    return util is not None and util >= _expect.get(expect, BUSY_UTIL)


def _mode(text: Optional[str]) -> Optional[str]:
    value = (text or "").strip().lower()
    return value if value in MODES else None


def _models(gpus: Iterable[Mapping[str, Any]]) -> str:
    return ", ".join("%dx %s" % (count, name) for name, count in sorted(Counter(g["name"] for g in gpus).items()))


# ---------------------------------------------------------------- driver and visibility


@check("driver.nvidia_smi", "nvidia-smi works", uses=("nvidia_smi", "nvidia_pci"))
def nvidia_smi_works(probes: Probes, expect: Expect) -> Finding:
    """Reads whether `nvidia-smi -q -x` ran and parsed, and the NVIDIA GPUs on the PCI bus.

    PASS when nvidia-smi answers; ERROR when it fails, hangs or returns unparsable XML (with its
    error); FAIL when NVIDIA GPUs sit on the PCI bus but nvidia-smi is not installed; SKIP on a
    host with neither (not a GPU host).

    Remediation: install the NVIDIA driver (it ships nvidia-smi) or set `nvidia_smi_path`; an
    nvidia-smi that hangs or errors points at a GPU or driver fault: read the kernel log for XIDs,
    then reset the GPU or reboot.
    """
    smi, pci = probes["nvidia_smi"], probes["nvidia_pci"]
    if smi["status"] == READ_OK:
        data = smi["data"]
        return finding(PASS, "nvidia-smi answers: driver %s, %d GPU(s)" % (data["driver_version"], len(data["gpus"])),
                       details={"driver_version": data["driver_version"], "cuda_version": data["cuda_version"],
                                "gpus": [gpu_ref(g) for g in data["gpus"]]})
    if smi["status"] == READ_FAILED:
        return finding(ERROR, "nvidia-smi failed: %s" % smi["reason"],
                       remediation="Run `nvidia-smi` by hand; an error or hang usually means a GPU or driver fault: "
                                   "check the kernel log for XIDs, then reset the GPU or reboot the node.")
    on_bus = pci["data"]["gpus"] if pci["status"] == READ_OK else []
    if on_bus:
        return finding(FAIL, "%d NVIDIA GPU(s) on the PCI bus (%s) but %s" % (
            len(on_bus), ", ".join(g["address"] for g in on_bus), smi["reason"]),
            details={"pci_gpus": on_bus},
            remediation="Install the NVIDIA driver (it ships nvidia-smi), or set nvidia_smi_path to where it is.")
    return finding(SKIP, "no NVIDIA GPU on the PCI bus and %s" % smi["reason"])


@check("driver.version", "Driver version", uses=GPU_PROBES)
def driver_version(probes: Probes, expect: Expect) -> Finding:
    """Reads the driver version nvidia-smi reports, against `driver_min` / `driver_max`.

    Versions compare numerically part by part (535.104.05 > 535.54.03). FAIL outside the range;
    PASS inside it, or informational when no range is expected; ERROR when an expected bound is
    not a dotted version.

    AMD GPUs: the ROCm amdgpu (DKMS) version, own numbering such as 6.10.5; with the
    distribution's in-box driver there is none: SKIP, WARN when a range is expected.

    Remediation: install a driver within the range (or fix the range in hydra_expect).
    """
    gate = _vendor_gate(probes)
    if gate:
        return gate
    smi = _vendor(probes)
    version = smi["data"]["driver_version"]
    bounds, bad = _version_bounds(expect, DRIVER_MIN, DRIVER_MAX)
    if bad:
        return bad
    parsed = _version(version)
    if parsed is None and smi["data"].get("vendor") == "amd":
        inbox = smi["data"].get("driver_kind") == "in-box"
        return finding(WARN if bounds else SKIP, "%s reports no amdgpu driver version%s" % (
            smi["data"]["source"], ": the distribution's in-box driver (kernel %s)" % smi["data"].get("kernel_release")
            if inbox else " (%r)" % version),
            {"driver_kind": smi["data"].get("driver_kind"), "kernel_release": smi["data"].get("kernel_release")},
            remediation="Install the ROCm amdgpu-dkms driver to get a versioned driver, or drop driver_min/driver_max "
                        "for this group." if bounds else None)
    if parsed is None:
        status = WARN if bounds else SKIP
        return finding(status, "nvidia-smi reports no usable driver version (%r)" % version,
                       remediation="Check the driver installation (`nvidia-smi -q | head`)." if bounds else None)
    details = {"driver_version": version, "driver_min": bounds.get(DRIVER_MIN, (None,))[0],
               "driver_max": bounds.get(DRIVER_MAX, (None,))[0]}
    if DRIVER_MIN in bounds and _compare(parsed, bounds[DRIVER_MIN][1]) < 0:
        return finding(FAIL, "driver %s is older than driver_min %s" % (version, bounds[DRIVER_MIN][0]), details,
                       remediation="Upgrade the NVIDIA driver to %s or newer." % bounds[DRIVER_MIN][0])
    if DRIVER_MAX in bounds and _compare(parsed, bounds[DRIVER_MAX][1]) > 0:
        return finding(FAIL, "driver %s is newer than driver_max %s" % (version, bounds[DRIVER_MAX][0]), details,
                       remediation="Install a driver no newer than %s (or raise driver_max)." % bounds[DRIVER_MAX][0])
    where = " (within the expected range)" if bounds else " (no driver_min/driver_max expected)"
    return finding(PASS, "driver %s%s" % (version, where), details)


@check("driver.kernel_module", "Kernel module matches the driver", uses=("kernel_module", "nvidia_smi", "amd_smi"))
def kernel_module(probes: Probes, expect: Expect) -> Finding:
    """Reads the loaded nvidia kernel module's version (/proc/driver/nvidia/version) and nvidia-smi's driver version.

    FAIL when they differ, or when nvidia-smi reports a driver/library version mismatch (the driver
    was upgraded without a reboot); PASS when equal; SKIP when the module is not loaded or
    nvidia-smi is absent; ERROR when nvidia-smi failed for another reason.

    AMD GPUs: PASS when amdgpu is loaded (DKMS version or in-box), FAIL when the loaded
    module's version differs from the one the tool reports or AMD GPUs sit on the bus without it.

    Remediation: reboot the node (or unload and reload the nvidia modules) so the kernel module
    matches the installed user-space driver.
    """
    if probes["kernel_module"]["status"] == READ_ABSENT and probes["nvidia_smi"]["status"] == READ_ABSENT \
            and probes["amd_smi"]["status"] == READ_OK:
        return amd_checks.kernel_module(probes)
    if probes["kernel_module"]["status"] != READ_OK:
        # What the registry's gate said when kernel_module was required: ERROR when it failed, SKIP when absent.
        envelope = probes["kernel_module"]
        failed = envelope["status"] == READ_FAILED
        return finding(ERROR if failed else SKIP, "probe kernel_module failed: %s" % envelope["reason"] if failed
                       else envelope["reason"])
    module = probes["kernel_module"]["data"]
    smi = probes["nvidia_smi"]
    remedy = ("Reboot the node, or stop every GPU process and reload the module (`rmmod nvidia_uvm nvidia_drm "
              "nvidia_modeset nvidia && modprobe nvidia`), so the kernel module matches the installed driver.")
    details = {"kernel_module_version": module["version"], "source": module["source"]}
    if smi["status"] == READ_FAILED:
        if "mismatch" in (smi["reason"] or "").lower():
            return finding(FAIL, "driver/library version mismatch (kernel module %s): %s" % (module["version"], smi["reason"]),
                           details, remediation=remedy)
        return finding(ERROR, "cannot compare: nvidia-smi failed: %s" % smi["reason"], details,
                       remediation="See driver.nvidia_smi.")
    if smi["status"] == READ_ABSENT:
        return finding(SKIP, "kernel module %s loaded, but %s" % (module["version"], smi["reason"]), details)
    user_space = smi["data"]["driver_version"]
    details["driver_version"] = user_space
    if user_space != module["version"]:
        return finding(FAIL, "kernel module %s but user-space driver %s: reboot or reload the module" % (
            module["version"], user_space), details, remediation=remedy)
    return finding(PASS, "kernel module %s matches the user-space driver" % module["version"], details)


@check("cuda.driver_version", "CUDA version the driver supports", requires=("nvidia_smi",))
def cuda_driver_version(probes: Probes, expect: Expect) -> Finding:
    """Reads the highest CUDA version the installed driver supports (nvidia-smi's cuda_version).

    Informational PASS; WARN when below `cuda_min` (applications built for a newer CUDA fail to
    start); ERROR when `cuda_min` is not a dotted version.

    Remediation: upgrade the NVIDIA driver to one that supports the CUDA version the workloads need.
    """
    version = probes["nvidia_smi"]["data"]["cuda_version"]
    bounds, bad = _version_bounds(expect, CUDA_MIN)
    if bad:
        return bad
    parsed = _version(version)
    if parsed is None:
        return finding(SKIP, "nvidia-smi reports no CUDA version (%r)" % version)
    details = {"cuda_version": version, "cuda_min": bounds.get(CUDA_MIN, (None,))[0]}
    if CUDA_MIN in bounds and _compare(parsed, bounds[CUDA_MIN][1]) < 0:
        return finding(WARN, "the driver supports CUDA up to %s, below cuda_min %s" % (version, bounds[CUDA_MIN][0]),
                       details, remediation="Upgrade the NVIDIA driver to one supporting CUDA %s." % bounds[CUDA_MIN][0])
    return finding(PASS, "the driver supports CUDA up to %s" % version, details)


@check("gpu.nvml_available", "NVML usable from Python", requires=("nvidia_smi", "nvml"))
def nvml_available(probes: Probes, expect: Expect) -> Finding:
    """Reads whether pynvml (nvidia-ml-py) initialises NVML on this host.

    PASS when it does; WARN when it fails although nvidia-smi works (monitoring agents and tools
    using pynvml will fail too: usually libnvidia-ml.so is not on the loader path); SKIP when
    pynvml is not installed or there is no nvidia-smi.

    Remediation: make libnvidia-ml.so.1 loadable for Python (ldconfig, or the container's driver
    mounts) and match nvidia-ml-py to the driver.
    """
    nvml = probes["nvml"]["data"]
    if nvml["available"]:
        return finding(PASS, "NVML initialises: driver %s, %d device(s)" % (nvml["driver_version"], len(nvml["devices"])),
                       details={"driver_version": nvml["driver_version"]})
    return finding(WARN, "NVML does not initialise from Python although nvidia-smi works: %s" % nvml["error"],
                   details={"error": nvml["error"]},
                   remediation="Make libnvidia-ml.so.1 loadable (run ldconfig; in containers mount the driver "
                               "libraries) and keep nvidia-ml-py current.")


@check("gpu.nvml_devices", "NVML lists the GPUs nvidia-smi sees", requires=("nvidia_smi", "nvml"))
def nvml_devices(probes: Probes, expect: Expect) -> Finding:
    """Reads the devices NVML lists (name, UUID, PCI bus id) and those nvidia-smi lists.

    PASS when both list the same UUIDs; WARN when they differ; SKIP when NVML does not initialise
    (gpu.nvml_available says why).

    Remediation: a difference means two driver stacks or a container exposing different GPUs:
    check NVIDIA_VISIBLE_DEVICES and that only one driver version is installed.
    """
    nvml = probes["nvml"]["data"]
    if not nvml["available"]:
        return finding(SKIP, "NVML not available: %s" % nvml["error"])
    smi_uuids = set(g["uuid"] for g in _gpus(probes))
    nvml_uuids = set(d["uuid"] for d in nvml["devices"])
    details = {"nvml_devices": nvml["devices"], "only_nvidia_smi": sorted(smi_uuids - nvml_uuids),
               "only_nvml": sorted(nvml_uuids - smi_uuids)}
    if smi_uuids != nvml_uuids:
        return finding(WARN, "NVML lists %d GPU(s), nvidia-smi %d; differing UUIDs: %s" % (
            len(nvml_uuids), len(smi_uuids), ", ".join(sorted(smi_uuids ^ nvml_uuids))), details,
            remediation="Check NVIDIA_VISIBLE_DEVICES and that a single driver version is installed.")
    return finding(PASS, "NVML and nvidia-smi list the same %d GPU(s)" % len(smi_uuids), details)


@check("runtime.gpu_passthrough", "GPUs on the PCI bus reach the driver",
       requires=("nvidia_pci", "nvidia_smi"), uses=("host",))
def gpu_passthrough(probes: Probes, expect: Expect) -> Finding:
    """Reads the NVIDIA GPU functions in /sys/bus/pci, the GPUs nvidia-smi sees and whether this is a container, VM or WSL.

    FAIL when a GPU on the PCI bus is neither seen by the driver nor handed to a VM (vfio-pci):
    the driver failed to initialise it or it fell off the bus. PASS otherwise, saying when a
    container sees only some host GPUs (normal) or when GPUs are bound to vfio-pci.

    Remediation: read the kernel log (`dmesg | grep NVRM`) for the missing addresses; reseat or
    reset the GPU, or reboot the node.
    """
    on_bus = probes["nvidia_pci"]["data"]["gpus"]
    gpus = _gpus(probes)
    host = probes["host"]["data"] if probes["host"]["status"] == READ_OK else {}
    runtime = "container" if host.get("is_container") else "WSL" if host.get("is_wsl") else "VM" if host.get("is_vm") else None
    seen = set(pci_key(g["pci_bus_id"]) for g in gpus)
    unseen = [g for g in on_bus if pci_key(g["address"]) not in seen]
    to_vms = [g for g in unseen if g["driver"] == "vfio-pci"]
    lost = [g for g in unseen if g["driver"] != "vfio-pci"]
    details = {"runtime": runtime, "pci_gpus": on_bus, "driver_gpus": [gpu_ref(g) for g in gpus],
               "not_seen_by_driver": [g["address"] for g in lost], "bound_to_vfio": [g["address"] for g in to_vms]}
    if not on_bus:
        where = " (in a %s, /sys shows no GPU function)" % runtime if runtime else ""
        return finding(PASS, "the driver sees %d GPU(s); none on the visible PCI bus%s" % (len(gpus), where), details)
    if lost and runtime == "container":
        return finding(PASS, "container: %d of the host's %d GPUs are exposed to it" % (len(gpus), len(on_bus)), details)
    if lost:
        return finding(FAIL, "%d of %d NVIDIA GPUs on the PCI bus are not seen by the driver: %s" % (
            len(lost), len(on_bus), ", ".join(g["address"] for g in lost)), details,
            remediation="Read the kernel log (`dmesg | grep -i nvrm`) for these addresses; reseat or reset the "
                        "GPU, or reboot the node.")
    notes = ["%d bound to vfio-pci (passed to VMs)" % len(to_vms)] if to_vms else []
    if runtime:
        notes.append("running in a %s" % runtime)
    return finding(PASS, "all %d NVIDIA GPUs on the PCI bus reach the driver%s" % (
        len(on_bus) - len(to_vms), " (%s)" % "; ".join(notes) if notes else ""), details)


@check("gpu.count", "GPU count", uses=("nvidia_smi", "nvidia_pci", "host", "amd_smi"))
def gpu_count(probes: Probes, expect: Expect) -> Finding:
    """Reads the GPUs nvidia-smi lists, against `gpu_count`, and the NVIDIA GPUs on the PCI bus.

    FAIL when fewer or more GPUs are visible than expected, naming the missing count and the PCI
    addresses the driver does not see; FAIL as well when a count is expected and nvidia-smi is
    absent. Without an expectation: FAIL when a GPU on the PCI bus is neither seen by the driver
    nor bound to vfio-pci (outside containers, which see only some of the host's GPUs), else PASS
    (informational); ERROR when nvidia-smi failed; SKIP with neither nvidia-smi nor an
    expectation.

    AMD GPUs (no NVIDIA driver): the GPUs amd-smi (else rocm-smi, else sysfs) lists, counted
    physically (a partitioned MI300X lists one logical device per partition), against `gpu_count`;
    FAIL for an AMD GPU on the PCI bus (class 0x03xx or 0x12xx) the tool does not list; WARN when
    the KFD topology has fewer GPU nodes than listed GPUs (ROCm cannot use them all).

    Remediation: find the missing GPU in the kernel log (XID 79, init failures) and reseat or
    replace it; fix hydra_expect.gpu_count when the group's expectation is wrong.
    """
    want = _expect.get(expect, GPU_COUNT)
    smi, pci = probes["nvidia_smi"], probes["nvidia_pci"]
    if smi["status"] == READ_ABSENT and probes["amd_smi"]["status"] != READ_ABSENT:
        return amd_checks.count(probes, want)
    if smi["status"] == READ_FAILED:
        return finding(ERROR, "cannot count GPUs: nvidia-smi failed: %s" % smi["reason"], remediation="See driver.nvidia_smi.")
    if smi["status"] == READ_ABSENT:
        if want is None:
            return finding(SKIP, smi["reason"])
        return finding(FAIL, "0 of %d expected GPUs visible: %s" % (want, smi["reason"]), {"expected": want, "seen": 0},
                       remediation="Install the NVIDIA driver, then re-run doctor.")
    gpus = smi["data"]["gpus"]
    seen_keys = set(pci_key(g["pci_bus_id"]) for g in gpus)
    unseen = [g["address"] for g in (pci["data"]["gpus"] if pci["status"] == READ_OK else [])
              if pci_key(g["address"]) not in seen_keys]
    details = {"expected": want, "seen": len(gpus), "attached_gpus": smi["data"]["attached_gpus"],
               "gpus": [gpu_ref(g) for g in gpus], "pci_not_seen_by_driver": unseen}
    if want is None:
        host = probes["host"]["data"] if probes["host"]["status"] == READ_OK else {}
        lost = [g["address"] for g in (pci["data"]["gpus"] if pci["status"] == READ_OK else [])
                if pci_key(g["address"]) not in seen_keys and g.get("driver") != "vfio-pci"]
        if lost and not (host or {}).get("is_container"):
            return finding(FAIL, "%d GPU(s) seen by the driver, but %d more on the PCI bus are not: %s" % (
                len(gpus), len(lost), ", ".join(lost)), details,
                remediation="Look for the missing GPU in the kernel log (XID 79, RmInitAdapter failures); reset or "
                            "reseat it, or reboot the node.")
        return finding(PASS, "%d GPU(s): %s (no gpu_count expected)" % (len(gpus), _models(gpus) or "none"), details)
    if len(gpus) < want:
        where = "; on the PCI bus but not seen by the driver: %s" % ", ".join(unseen) if unseen else ""
        return finding(FAIL, "%d GPUs where %d are expected: %d missing%s" % (len(gpus), want, want - len(gpus), where),
                       details, remediation="Look for the missing GPU in the kernel log (XID 79, RmInitAdapter failures); "
                                            "reseat or replace it.")
    if len(gpus) > want:
        return finding(FAIL, "%d GPUs where %d are expected: %d more than expected" % (len(gpus), want, len(gpus) - want),
                       details, remediation="Fix hydra_expect.gpu_count for this host's group, or move the host.")
    return finding(PASS, "%d GPUs, as expected" % len(gpus), details)


@check("gpu.model", "GPU model", uses=GPU_PROBES)
def gpu_model(probes: Probes, expect: Expect) -> Finding:
    """Reads each GPU's product name, against `gpu_model` (a case-insensitive substring such as "A100-SXM4-80GB").

    FAIL naming the GPUs whose name does not contain it, and when a model is expected but
    nvidia-smi is absent; PASS (informational: the models present) without an expectation; ERROR
    when nvidia-smi failed.

    AMD GPUs: their market or product name ("AMD Instinct MI210").

    Remediation: move the host to the inventory group matching its GPUs, or fix hydra_expect.gpu_model.
    """
    want = _expect.get(expect, GPU_MODEL)
    smi = _vendor(probes)
    if smi["status"] == READ_FAILED:
        return finding(ERROR, "cannot read GPU models: %s failed: %s" % (smi.get("tool", "nvidia-smi"), smi["reason"]),
                       remediation="See driver.%s." % smi.get("tool", "nvidia-smi").replace("-", "_"))
    if smi["status"] == READ_ABSENT:
        if want is None:
            return finding(SKIP, smi["reason"])
        return finding(FAIL, "no GPU visible where %s GPUs are expected: %s" % (want, smi["reason"]),
                       remediation="Install the NVIDIA driver, then re-run doctor.")
    gpus = smi["data"]["gpus"]
    if want is None:
        return finding(PASS, "%s (no gpu_model expected)" % (_models(gpus) or "no GPU"),
                       {"gpus": [gpu_ref(g) for g in gpus]})
    wrong = [g for g in gpus if want.lower() not in (g["name"] or "").lower()]
    if wrong:
        return finding(FAIL, "%d of %d GPUs are not %s: %s" % (len(wrong), len(gpus), want, "; ".join(
            "%s is %s" % (_label(gpu_ref(g)), g["name"]) for g in wrong[:3])), {"gpus": [gpu_ref(g) for g in wrong]},
            remediation="Move the host to the group matching its GPUs, or fix hydra_expect.gpu_model.")
    if not gpus:
        return finding(FAIL, "no GPU visible where %s GPUs are expected" % want,
                       remediation="Check driver.nvidia_smi and the kernel log.")
    return finding(PASS, "all %d GPUs are %s" % (len(gpus), want), {"gpus": [gpu_ref(g) for g in gpus]})


# ---------------------------------------------------------------- configuration


@check("gpu.persistence_mode", "Persistence mode", requires=("nvidia_smi",))
def persistence_mode(probes: Probes, expect: Expect) -> Finding:
    """Reads each GPU's persistence mode.

    WARN for GPUs with persistence mode Disabled: the driver tears the GPU state down whenever
    the last process exits, so every job start pays seconds of re-initialisation and settings
    such as application clocks are lost. PASS when enabled, or when `persistence_mode: disabled`
    says off is intended; SKIP where the driver does not report it. Unreadable values among what
    it reads (an NVML error string such as Unknown Error, text where a number belongs, a number
    out of range) are an ERROR naming the GPU and field, a FAIL with a reset/reboot remediation
    when they say the GPU is lost or requires a reset; a GPU with nothing readable is not
    judged, and SKIP says "nothing readable" when no GPU is.

    Remediation: run the nvidia-persistenced service (`systemctl enable --now nvidia-persistenced`)
    or `nvidia-smi -pm 1`.
    """
    wanted, bad = _choice(expect, PERSISTENCE_MODE)
    if bad:
        return bad
    results = []
    gpus = _gpus(probes)
    for gpu in gpus:
        mode = _mode(gpu["persistence_mode"])
        if mode is None:
            continue
        off = mode == "disabled" and wanted != "disabled"
        results.append((WARN if off else PASS, _detail(gpu, persistence_mode=mode), "persistence mode is off"))
    accepted = " (disabled accepted by expect.persistence_mode)" if wanted == "disabled" else ""
    return _verdict(_with_unreadable(results, gpus, _READS_PERSISTENCE_MODE), "persistence mode as intended on %d GPU(s)%s" % (len(results), accepted),
                    "Enable it at boot: `systemctl enable --now nvidia-persistenced` (or `nvidia-smi -pm 1`, or the "
                    "continuum.hydra.gpu_settings role with gpu_settings_persistence_mode).",
                    skip_message="no GPU reports a persistence mode")


def _mode_results(gpus: list[dict[str, Any]], section: str, label: str, wanted: Optional[str],
                  pending_needs: str) -> list[tuple[str, dict[str, Any], str]]:
    """Per GPU (current, pending) of an ECC- or MIG-like mode against the expected one; GPUs without it are left out."""
    results = []
    for gpu in gpus:
        current, pending = _mode(gpu[section]["current"]), _mode(gpu[section]["pending"])
        values: dict[str, Any] = {"current": current, "pending": pending}
        if section == "mig":
            values["instances"] = gpu[section]["instances"]
        values["expected"] = wanted
        detail = _detail(gpu, **values)
        if current is None:
            if wanted == "enabled":
                results.append((FAIL, detail, "no %s support where %s enabled is expected" % (label, label)))
            continue
        if wanted and current != wanted:
            results.append((WARN if pending == wanted else FAIL, detail,
                            "%s %s, expected %s%s" % (label, current, wanted, " (pending: reset needed)" if pending == wanted else "")))
        elif pending and pending != current:
            results.append((WARN, detail, "%s %s, pending %s: %s" % (label, current, pending, pending_needs)))
        else:
            results.append((PASS, detail, "%s %s" % (label, current)))
    return results


@check("gpu.ecc_mode", "ECC mode", requires=("nvidia_smi",))
def ecc_mode(probes: Probes, expect: Expect) -> Finding:
    """Reads each GPU's current and pending ECC mode, against `ecc_mode`.

    WARN when pending differs from current (a GPU reset or reboot is needed to apply it); FAIL
    when the current mode differs from the expected one (or the GPU has no ECC where enabled is
    expected), unless the pending mode fixes it (then WARN). PASS otherwise (informational
    without an expectation); SKIP when no GPU supports ECC. Unreadable values among what it
    reads (an NVML error string such as Unknown Error, text where a number belongs, a number out
    of range) are an ERROR naming the GPU and field, a FAIL with a reset/reboot remediation when
    they say the GPU is lost or requires a reset; a GPU with nothing readable is not judged, and
    SKIP says "nothing readable" when no GPU is.

    Remediation: `nvidia-smi -e 1 -i <index>` (or `-e 0`), then reset the GPU or reboot.
    """
    wanted, bad = _choice(expect, ECC_MODE)
    if bad:
        return bad
    gpus = _gpus(probes)
    results = _mode_results(gpus, "ecc", "ECC", wanted, "reboot/reset needed")
    modes = Counter(result[1]["current"] for result in results if result[1]["current"])
    summary = ", ".join("%s on %d" % (mode, count) for mode, count in sorted(modes.items()))
    target = "ECC %s" % wanted if wanted else "ECC mode set"
    return _verdict(_with_unreadable(results, gpus, _READS_ECC_MODE), "ECC %s GPU(s)%s" % (summary, "" if wanted else " (no ecc_mode expected)"),
                    {FAIL: "Set %s with `nvidia-smi -e %d -i <index>`, then reset the GPU or reboot." % (
                        target, 1 if wanted == "enabled" else 0),
                     WARN: "Reset the GPU (`nvidia-smi -r -i <index>`) or reboot to apply the pending ECC mode."},
                    skip_message="no GPU supports ECC")


@check("gpu.mig", "MIG mode", requires=("nvidia_smi",))
def mig_mode(probes: Probes, expect: Expect) -> Finding:
    """Reads each MIG-capable GPU's current and pending MIG mode and its MIG instances, against `mig_mode`.

    WARN when pending differs from current (a GPU reset is needed); FAIL when the current mode
    differs from the expected one (WARN when the pending mode fixes it) or when MIG is expected
    on a GPU without MIG. PASS otherwise (informational without an expectation); SKIP when no
    GPU supports MIG. Unreadable values among what it reads (an NVML error string such as
    Unknown Error, text where a number belongs, a number out of range) are an ERROR naming the
    GPU and field, a FAIL with a reset/reboot remediation when they say the GPU is lost or
    requires a reset; a GPU with nothing readable is not judged, and SKIP says "nothing
    readable" when no GPU is.

    Remediation: `nvidia-smi -mig 1 -i <index>` (or `-mig 0`), then reset the GPU.
    """
    wanted, bad = _choice(expect, MIG_MODE)
    if bad:
        return bad
    gpus = _gpus(probes)
    results = _mode_results(gpus, "mig", "MIG", wanted, "reset needed")
    enabled = [result[1] for result in results if result[1]["current"] == "enabled"]
    return _verdict(_with_unreadable(results, gpus, _READS_MIG), "MIG enabled on %d of %d capable GPU(s) (%d instances)%s" % (
        len(enabled), len(results), sum(d["instances"] for d in enabled), "" if wanted else "; no mig_mode expected"),
        {FAIL: "Set the MIG mode with `nvidia-smi -mig %d -i <index>`, then reset the GPU." % (1 if wanted == "enabled" else 0),
         WARN: "Reset the GPU (`nvidia-smi -r -i <index>`) to apply the pending MIG mode."},
        skip_message="no GPU supports MIG")


# ---------------------------------------------------------------- health


@check("gpu.ecc_errors", "ECC errors", uses=GPU_PROBES)
def ecc_errors(probes: Probes, expect: Expect) -> Finding:
    """Reads each GPU's volatile (since driver load) and aggregate (lifetime) ECC counters, DRAM and SRAM.

    FAIL when an uncorrectable error is counted since the driver loaded (volatile, DRAM or
    SRAM); WARN when only the lifetime (aggregate) count has uncorrectable errors (an old event
    the memory may have remapped: gpu.row_remap judges whether it did), when volatile
    correctable errors exceed `ecc_correctable_warn` (default 100) or when the SRAM error
    threshold is exceeded; PASS otherwise; SKIP when no GPU has ECC counters (ECC off or
    unsupported). Unreadable values among what it reads (an NVML error string such as Unknown
    Error, text where a number belongs, a number out of range) are an ERROR naming the GPU and
    field, a FAIL with a reset/reboot remediation when they say the GPU is lost or requires a
    reset; a GPU with nothing readable is not judged, and SKIP says "nothing readable" when no
    GPU is.

    AMD GPUs: the RAS counts since driver load (amd-smi metric ecc and ecc_blocks, sysfs
    ras/*_err_count), judged where ECC is enabled on some block; an uncorrectable or deferred
    (poison) count is a FAIL, also where the RAS block state reads "N/A" or DISABLED (the FAIL names
    that contradiction: a reported error is never SKIP). A GPU that amd-smi static lists and metric
    does not has its readings unreadable (ERROR), never "nothing readable". rocm-smi reports no
    counts: not judged.

    Remediation: drain the node, reset the GPU and re-check; replace the GPU when uncorrectable
    errors recur. A lifetime count alone: check gpu.row_remap, then clear the counters with
    `nvidia-smi -p 1` once the event is understood.
    """
    gate = _vendor_gate(probes)
    if gate:
        return gate
    threshold = _expect.get(expect, ECC_CORRECTABLE_WARN)
    results = []
    counts: list[dict[str, Any]] = []
    gpus = _gpus(probes)
    for gpu in gpus:
        volatile, aggregate = gpu["ecc"]["volatile"], gpu["ecc"]["aggregate"]
        if volatile["correctable"] is None and volatile["uncorrectable"] is None and aggregate["uncorrectable"] is None:
            continue
        current = _uncorrectable(volatile, "volatile")
        lifetime = _uncorrectable(aggregate, "aggregate")
        correctable = volatile["correctable"] or 0
        detail = _detail(gpu, volatile=volatile, aggregate=aggregate)
        _counted(counts, gpu, volatile["correctable"])
        if current:
            results.append((FAIL, detail, "uncorrectable ECC errors since the driver loaded (%s)%s" % (
                _counts(current), amd_checks.ecc_state_contradiction(gpu))))
        elif lifetime:
            results.append((WARN, detail, "uncorrectable ECC errors in the lifetime count only (%s)" % _counts(lifetime)))
        elif correctable > threshold:
            results.append((WARN, detail, "%d correctable ECC errors since boot (over %d)" % (correctable, threshold)))
        elif gpu["ecc"]["sram_threshold_exceeded"]:
            results.append((WARN, detail, "SRAM correctable error threshold exceeded"))
        else:
            results.append((PASS, detail, "no uncorrectable errors"))
    found = _verdict(_with_unreadable(results, gpus, _READS_ECC_ERRORS), "no uncorrectable ECC errors on %d GPU(s)" % len(results),
                     {FAIL: RESET_OR_DRAIN + "; replace the GPU if uncorrectable errors recur.",
                      WARN: "Watch the GPU: check gpu.row_remap, reset it at the next maintenance window and replace it "
                            "if errors recur; clear a reviewed lifetime count with nvidia-smi -p 1."},
                     skip_message="no GPU reports ECC counters (ECC disabled or unsupported)")
    return _with_counts(counts, found)


def _uncorrectable(counts: Mapping[str, Any], scope: str) -> dict[str, int]:
    """Non-zero uncorrectable counts of one scope, by memory kind (the total where no split is reported)."""
    found = OrderedDict(("%s %s" % (scope, kind), counts["%s_uncorrectable" % kind.lower()])
                        for kind in ("DRAM", "SRAM") if counts["%s_uncorrectable" % kind.lower()])
    if not found and counts["uncorrectable"]:
        found["%s total" % scope] = counts["uncorrectable"]
    if counts.get("deferred"):
        # AMD: uncorrectable data marked poisoned, its consumption deferred (memory poison).
        found["%s deferred" % scope] = counts["deferred"]
    return found


def _counts(found: Mapping[str, int]) -> str:
    return ", ".join("%s %d" % (k, v) for k, v in found.items())


@check("gpu.row_remap", "Row remapping / page retirement", uses=GPU_PROBES)
def row_remap(probes: Probes, expect: Expect) -> Finding:
    """Reads row remapping (Ampere and newer) or retired pages (older GPUs) of each GPU.

    Row remapping: FAIL on a remapping failure; WARN when a remap is pending (a GPU reset is
    needed to apply it), when rows remapped for uncorrectable errors reach
    `row_remap_uncorrectable_warn` (default 512), or when a memory bank has no spare row left.
    Retired pages: WARN when a retirement is pending; FAIL when pages retired for double-bit
    errors reach `retired_pages_dbe_fail` (default 15, DCGM's soft limit) or all retired pages
    reach 60 (DCGM's limit). SKIP where neither is reported (GeForce boards; MIG-enabled GPUs do
    not report remapping). Unreadable values among what it reads (an NVML error string such as
    Unknown Error, text where a number belongs, a number out of range) are an ERROR naming the
    GPU and field, a FAIL with a reset/reboot remediation when they say the GPU is lost or
    requires a reset; a GPU with nothing readable is not judged, and SKIP says "nothing
    readable" when no GPU is.

    AMD GPUs: the bad-page table (sysfs ras/gpu_vram_bad_pages): FAIL on an unreservable
    page or retired pages at the board's bad_page_threshold, WARN on pending pages or retired pages
    at 80 % of the threshold.

    Remediation: reset the GPU to apply pending remaps/retirements; replace a GPU with a remap
    failure or too many retired pages.
    """
    gate = _vendor_gate(probes)
    if gate:
        return gate
    unc_warn, dbe_fail = _expect.get(expect, ROW_REMAP_UNC_WARN), _expect.get(expect, RETIRED_DBE_FAIL)
    results = []
    counts: list[dict[str, Any]] = []
    gpus = _gpus(probes)
    for gpu in gpus:
        remap, retired = gpu["remapped_rows"], gpu["retired_pages"]
        if gpu.get("vendor") == "amd":
            _counted(counts, gpu, (gpu["bad_pages"] or {}).get("retired"))
            judged = amd_checks.bad_pages(gpu)
            if judged is not None:
                results.append(judged)
            continue
        if remap is not None and all(remap[key] is None for key in ("correctable", "uncorrectable", "pending", "failure")) \
                and all(value is None for value in remap["histogram"].values()):
            remap = None  # the structure is there but nothing in it is readable
        if remap is not None:
            detail = _detail(gpu, remapped_rows=remap)
            _counted(counts, gpu, (remap["correctable"] or 0) + (remap["uncorrectable"] or 0))
            exhausted = remap["histogram"].get("none") or 0
            if remap["failure"]:
                results.append((FAIL, detail, "row remapping failed"))
            elif remap["pending"]:
                results.append((WARN, detail, "row remap pending: reset needed"))
            elif (remap["uncorrectable"] or 0) >= unc_warn:
                results.append((WARN, detail, "%d rows remapped for uncorrectable errors" % remap["uncorrectable"]))
            elif exhausted:
                results.append((WARN, detail, "%d memory bank(s) have no spare row left" % exhausted))
            else:
                results.append((PASS, detail, "no pending or failed remap"))
        elif retired["single_bit"] is not None or retired["double_bit"] is not None:
            detail = _detail(gpu, retired_pages=retired)
            _counted(counts, gpu, (retired["single_bit"] or 0) + (retired["double_bit"] or 0))
            dbe, total = retired["double_bit"] or 0, (retired["single_bit"] or 0) + (retired["double_bit"] or 0)
            if dbe >= dbe_fail or total >= RETIRED_PAGES_LIMIT:
                results.append((FAIL, detail, "%d pages retired (%d for double-bit errors)" % (total, dbe)))
            elif retired["pending"]:
                results.append((WARN, detail, "page retirement pending: reset needed"))
            else:
                results.append((PASS, detail, "%d pages retired" % total))
    mig = any(_mode(g["mig"]["current"]) == "enabled" and g["remapped_rows"] is None for g in _gpus(probes))
    found = _verdict(_with_unreadable(results, gpus, _READS_ROW_REMAP),
                     "no pending or failed row remap / page retirement on %d GPU(s)" % len(results),
                     {FAIL: "Drain the node and replace the GPU (remapping failed or retired pages at the limit).",
                      WARN: RESET_OR_DRAIN + " to apply a pending remap or retirement; replace the GPU when spare rows "
                                             "run out or remaps keep growing."},
                     skip_message="no GPU reports row remapping or retired pages%s" % (
                         " (not reported while MIG is enabled)" if mig else ""))
    return _with_counts(counts, found)


# nvidia-smi's gpu_recovery_action (DTD v13, NVML nvmlGpuRecoveryAction_t) -> what to do.
_RECOVERY_ADVICE = OrderedDict((
    ("reset", "Drain the GPU's jobs, then reset it (`nvidia-smi -r -i <index>` with no processes on it) or reboot."),
    ("reboot", "Drain the node and reboot it: the driver says only a reboot recovers this GPU."),
    ("drain p2p", "Drain the node's peer-to-peer (NVLink/P2P) work: stop the jobs using this GPU's NVLinks, then "
                  "re-check; reset the GPU if the action stays."),
    ("drain and reset", "Drain the node, then reset the GPU (`nvidia-smi -r -i <index>` with no processes on it) or "
                        "reboot."),
))
_READS_RECOVERY_ACTION = ("recovery",)


@check("gpu.recovery_action", "Recovery action the driver asks for", requires=("nvidia_smi",))
def recovery_action(probes: Probes, expect: Expect) -> Finding:
    """Reads each GPU's `gpu_recovery_action` (driver 570+: None, Reset, Reboot, Drain P2P, Drain and Reset),
    `gpu_reset_status` (reset required, drain and reset recommended: Yes/No) and every value nvidia-smi
    could not read.

    FAIL when the recovery action is anything but None, when a reset is required or a drain and reset
    recommended, or when any value of the GPU reads "GPU is lost" / "GPU requires reset": the remediation
    is the action the driver names. ERROR when the recovery fields themselves are unreadable. PASS when
    they read None / No; SKIP ("nothing readable") where the driver reports neither field (older drivers).

    Remediation: what the driver asks: reset the GPU (`nvidia-smi -r -i <index>`), reboot the node, drain
    P2P work, or drain and reset; a lost GPU needs a reset, reboot or power-cycle.
    """
    results: list[GpuResult] = []
    advice: list[str] = []
    gpus = _gpus(probes)
    for gpu in gpus:
        recovery = gpu["recovery"]
        action = (recovery["action"] or "").strip()
        lost = OrderedDict((path, raw) for path, raw in sorted((gpu.get("unreadable") or {}).items()) if is_lost(raw))
        detail = _detail(gpu, recovery_action=recovery["action"], reset_required=recovery["reset_required"],
                         drain_and_reset_recommended=recovery["drain_and_reset_recommended"])
        if action and action.lower() != "none":
            advice.append(_RECOVERY_ADVICE.get(action.lower(), "Follow the driver's recovery action %r (NVIDIA's "
                                                               "nvidia-smi documentation), then re-check." % action))
            results.append((FAIL, detail, "the driver asks for recovery action %s" % action))
        elif recovery["drain_and_reset_recommended"]:
            advice.append(_RECOVERY_ADVICE["drain and reset"])
            results.append((FAIL, detail, "drain and reset recommended"))
        elif recovery["reset_required"]:
            advice.append(_RECOVERY_ADVICE["reset"])
            results.append((FAIL, detail, "GPU reset required"))
        elif lost:
            detail["unreadable"] = dict(lost)
            results.append((FAIL, detail, "GPU lost or needing a reset: %s" % _describe(lost)))
        elif action or recovery["reset_required"] is not None or recovery["drain_and_reset_recommended"] is not None:
            results.append((PASS, detail, "no recovery action"))
    status_advice = " ".join(OrderedDict.fromkeys(advice)) or None
    return _verdict(_with_unreadable(results, gpus, _READS_RECOVERY_ACTION), "no recovery action asked for on %d GPU(s)" % len(results),
                    {FAIL: status_advice or LOST_ADVICE},
                    skip_message="no GPU reports a recovery action or reset status (driver older than 535?)")


def _xid_info(code: int) -> dict[str, Any]:
    mnemonic, action = xid_table.XID_CATALOG.get(code, (None, None))
    severity = xid_table.SEVERITY_OVERRIDES.get(code) or xid_table.SEVERITY_BY_ACTION.get(action or "") or xid_table.WARNING
    return {"mnemonic": mnemonic, "nvidia_action": action, "severity": severity,
            "description": xid_table.DESCRIPTIONS.get(code) or mnemonic or "not in NVIDIA's XID catalogue"}


_SEVERITY_RANK = {xid_table.INFO: 0, xid_table.WARNING: 1, xid_table.CRITICAL: 2}


def _log_gpu(pci: Optional[str], by_pci: Mapping[Optional[str], Any], uuids: Mapping[str, str]) -> dict[str, Any]:
    """The GPU a kernel-log line names: nvidia-smi's record, else its address and the UUID the log maps to it."""
    gpu = by_pci.get(pci) if pci else None
    if gpu:
        return gpu_ref(gpu)
    return {"index": None, "pci_bus_id": pci, "uuid": uuids.get(pci) if pci else None, "name": None}


def _times(group: Mapping[str, Any]) -> dict[str, Any]:
    return {"count": group["count"], "first_seen": group["first_seen"], "last_seen": group["last_seen"],
            "last_message": group["last_message"]}


XID_POLICY = _expect.key("xid_policy")
XID_WINDOW = _expect.key("xid_window_hours")


def xid_policy(expect: Expect) -> dict[int, dict[str, Any]]:
    """hydra_expect.xid_policy by XID code, each rule with its count and window filled in (validated by _expect)."""
    window = _expect.get(expect, XID_WINDOW)
    return dict((_expect.xid_code(code) or 0, {"severity": rule["severity"], "count": rule.get("count", 1),
                                               "window_hours": rule.get("window_hours") or window})
                for code, rule in (_expect.get(expect, XID_POLICY) or {}).items())


def _apply_policy(entry: dict[str, Any], group: Mapping[str, Any], rule: Mapping[str, Any], window_hours: float) -> None:
    """The site's rule for this code: its severity once ``count`` events hit the GPU within ``window_hours``."""
    hours = rule["window_hours"]
    seen = group["count"] if hours >= window_hours else (group.get("within") or {}).get("%g" % hours, 0)
    applied = seen >= rule["count"]
    entry["policy"] = dict(rule, seen=seen, applied=applied, catalogue_severity=entry["severity"])
    if applied:
        entry["severity"] = rule["severity"]
        entry["description"] = "%s; site policy: %s after %d in %g h" % (entry["description"], rule["severity"], rule["count"], hours)


def _xid_entry(group: Mapping[str, Any], by_pci: Mapping[Optional[str], Any], uuids: Mapping[str, str],
               counts: Sequence[Mapping[str, Any]], policy: Optional[Mapping[int, Mapping[str, Any]]] = None,
               window_hours: float = 24) -> dict[str, Any]:
    """One (address, code) of the window, graded; an Xid 45 naming an absent cause is graded as that cause; the site's
    xid_policy rule for the code, when there is one, last."""
    entry = dict(_log_gpu(group["pci"], by_pci, uuids), xid=group["code"], **_times(group))
    entry.update(_xid_info(group["code"]))
    causes = sorted(int(code) for code in (group.get("caused_by") or {}))
    if group["code"] in xid_table.LINKED_BY_CAUSE and causes:
        entry["caused_by"] = causes
        present = set(other["code"] for other in counts if other["pci"] == group["pci"])
        absent = [(code, _xid_info(code)) for code in causes if code not in present]
        if absent:
            code, info = max(absent, key=lambda item: _SEVERITY_RANK[item[1]["severity"]])
            entry.update(graded_as=code, severity=info["severity"], nvidia_action=info["nvidia_action"],
                         description="%s, caused by XID %d (%s), which is not itself in the window" % (
                             entry["description"], code, info["description"]))
    rule = (policy or {}).get(group["code"])
    if rule is not None:
        _apply_policy(entry, group, rule, window_hours)
    return entry


def _loss_entry(group: Mapping[str, Any], by_pci: Mapping[Optional[str], Any], uuids: Mapping[str, str]) -> dict[str, Any]:
    """A GPU lost without an Xid line: always critical."""
    description, action = xid_table.LOSS_CATALOG[group["kind"]]
    entry = dict(_log_gpu(group["pci"], by_pci, uuids), xid=None, loss=group["kind"], driver_instance=group.get("instance"),
                 **_times(group))
    entry.update(mnemonic=None, nvidia_action=action, severity=xid_table.CRITICAL, description=description)
    return entry


def _sxid_entry(group: Mapping[str, Any]) -> dict[str, Any]:
    """An NVSwitch SXid (address, code): fatal from the line's own word, else from the SXid table."""
    name, table_fatal = xid_table.SXID_CATALOG.get(group["code"], (None, None))
    fatal = group.get("fatal")
    fatal = table_fatal if fatal is None else fatal
    return dict(nvswitch=group.get("device") or group["address"], pci_bus_id=group["address"],
                device_name="nvidia-nvswitch%s" % group.get("switch", "?"), sxid=group["code"], fatal=fatal,
                description=name or "SXid %d" % group["code"],
                nvidia_action="NVSWITCH_FATAL" if fatal else "NVSWITCH_NON_FATAL",
                severity=xid_table.CRITICAL if fatal else xid_table.WARNING, **_times(group))


def _event_label(entry: Mapping[str, Any]) -> str:
    """How a kernel-log finding names its device: GPU index, else address (+ UUID), else the driver's GPU number."""
    if entry.get("nvswitch"):
        return "NVSwitch %s (%s)" % (entry["nvswitch"], entry["device_name"])
    if entry.get("index") is None and entry.get("pci_bus_id") is None:
        if entry.get("driver_instance"):
            return "%s (the driver's GPU number; the line names no PCI address)" % entry["driver_instance"]
        return "a GPU the line does not name"
    label = _label(entry)
    if entry.get("index") is None and entry.get("uuid"):
        label += " (%s)" % entry["uuid"]
    return label


def _event_phrase(entry: Mapping[str, Any]) -> str:
    if entry.get("nvswitch"):
        text = "SXid %d (%s, %s) x%d on %s" % (entry["sxid"], entry["description"],
                                               "fatal" if entry["fatal"] else "non-fatal", entry["count"], _event_label(entry))
    elif entry.get("loss"):
        text = "%s x%d on %s" % (entry["description"], entry["count"], _event_label(entry))
    else:
        text = "XID %d (%s) x%d on %s" % (entry["xid"], entry["description"], entry["count"], _event_label(entry))
    return "%s, %s%s" % (text, entry["when"], " (%s)" % entry["held"] if entry.get("held") else "")


_ACTION_ADVICE = OrderedDict((
    ("RESTART_BM", "power-cycle the node"),
    ("RESTART_VM", "restart the VM"),
    ("RESET_GPU", "reset the GPU (`nvidia-smi -r -i <index>`) or reboot"),
    ("WORKFLOW_XID_48", "reset the GPU and replace it if double-bit errors recur"),
    ("WORKFLOW_NVLINK_ERR", "reset the GPUs and check the NVLink/NVSwitch fabric"),
    ("WORKFLOW_NVLINK5_ERR", "reset the GPUs and check the NVLink/NVSwitch fabric"),
    ("CHECK_MECHANICALS", "check power cabling and cooling"),
    ("UPDATE_SWFW", "update the driver and firmware"),
    ("CHECK_UVM", "check the nvidia-uvm module"),
    ("UNEXPECTED_ERR_REPORT_ISSUE", "collect `nvidia-bug-report.sh` and report it to NVIDIA"),
    ("NVSWITCH_FATAL", "reboot the node to reset the NVSwitches and GPUs, then check gpu.fabric_manager"),
    ("NVSWITCH_NON_FATAL", "watch the NVSwitch; collect `nvidia-bug-report.sh` if the SXid repeats"),
))


@check("gpu.xid_errors", "XID errors in the kernel log", requires=("kernel_log",), uses=("nvidia_smi",))
def xid_errors(probes: Probes, expect: Expect) -> Finding:
    """Reads the kernel log within `xid_window_hours` (default 24): NVRM Xid lines, GPU loss without an Xid, NVSwitch SXids.

    Every event in the window is counted per (GPU address, code), so an application Xid storm never
    hides a fatal Xid; details list each (address, code) with its count, first and last time, and the
    probe lists only a sample of the events (`xids_dropped` says how many it left out). Each GPU is
    named by its nvidia-smi index, else by its PCI address and the UUID the log maps to it.

    Xid codes are graded from NVIDIA's XID catalogue ("Analyzing Xid Errors with the Xid Catalog",
    https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, "Resolution Bucket (Immediate
    Action)", kept as data in xid_table.py): critical (reset the GPU or reboot: 48 DBE, 64, 74 NVLink, 79
    fallen off the bus, 95 uncontained ECC, 119/120 GSP, ...) is a FAIL; warning (63 row remap recorded,
    92 high single-bit ECC rate, 94 contained ECC, codes NVIDIA asks to report, unknown codes) a WARN;
    application faults and benign codes (13, 31, 43, 45, ...) are listed but PASS. An Xid 45 that names its
    cause ("caused by previous Xid 149") is graded as that Xid when that Xid is not itself in the window.

    A GPU lost without an Xid line is a FAIL naming its PCI address: "GPU has fallen off the bus" (one-line
    and three-line forms), `RmInitAdapter failed!` (0x62: GSP firmware), `NV_ERR_RESET_REQUIRED`, the GSP
    timeout banner; a line naming only the driver's GPU number (GPU6) is named by that number.

    NVSwitch SXid lines are graded by their own Fatal / Non-fatal word (FAIL / WARN) and, for lines without
    it, by the SXid table in xid_table.py (NVIDIA Fabric Manager User Guide, DU-09883-001, "NVSwitch SXid
    Errors", https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html), naming the
    NVSwitch PCI address. SKIP on a host with no NVIDIA driver and nothing in the log. A repaired GPU keeps
    failing until its events age out of the window: every event is judged inside it and the message says when it
    last happened; an event of unknown time (busybox dmesg without timestamps, a line without its stamp) is a WARN,
    never a FAIL. Site policy, `xid_policy` (e.g. `{13: {severity: critical, count: 5, window_hours: 6}}` promotes
    Xid 13 to FAIL once 5 hit one GPU within 6 h; `{63: {severity: info}}` demotes 63): a code's rule sets its
    severity once `count` (default 1) events of it hit one GPU within `window_hours` (default `xid_window_hours`, at
    most that); below the count the catalogue's grade stands (details.gpus[].policy says which). A driver line that
    cannot be read (an impossible
    date, a bad UTC offset, a 5,000-digit number) is skipped and counted in details.bad_lines, the rest
    judged: an Xid 79 beside it still FAILs; with nothing else found the check is WARN, never PASS.

    Remediation: drain the node and follow NVIDIA's action for each code (power-cycle for 79 and a GPU
    fallen off the bus, GPU reset or reboot for most others, reboot for a fatal SXid); run
    nvidia-bug-report.sh before a reset when NVIDIA support is involved.
    """
    log = probes["kernel_log"]["data"]
    smi = probes["nvidia_smi"]
    window = "last %d h" % log["window_hours"] if log["window_applied"] else "log since boot"
    counts = log.get("xid_counts") or []
    losses, sxids = log.get("gpu_losses") or [], log.get("sxid_counts") or []
    if not (counts or losses or sxids):
        if smi["status"] == READ_ABSENT:
            return finding(SKIP, "no XID in the kernel log (%s) and no NVIDIA driver: %s" % (window, smi["reason"]))
        return finding(PASS, "no XID in the kernel log (%s, from %s)" % (window, log["source"]),
                       {"source": log["source"], "window_hours": log["window_hours"]})
    by_pci = dict((pci_key(g["pci_bus_id"]), g) for g in (smi["data"]["gpus"] if smi["status"] == READ_OK else []))
    policy = xid_policy(expect)
    entries = [_xid_entry(group, by_pci, log["gpu_uuids"], counts, policy, log["window_hours"]) for group in counts]
    seen = set((group["pci"], group["code"]) for group in counts)
    entries += [_loss_entry(group, by_pci, log["gpu_uuids"]) for group in losses
                if not (group["kind"] == "fallen_off_bus" and (group["pci"], 79) in seen)]
    switches = [_sxid_entry(group) for group in sxids]
    severities = {xid_table.CRITICAL: FAIL, xid_table.WARNING: WARN, xid_table.INFO: PASS}
    for entry in entries + switches:
        # Judged inside the window: an event of unknown time is never a FAIL (checks/events.py).
        entry["status"], entry["held"] = events.dated(severities[entry["severity"]], entry, log)
        entry["when"] = events.when(entry, log)
    status = worst(e["status"] for e in entries + switches)
    details = {"source": log["source"], "window_hours": log["window_hours"], "window_applied": log["window_applied"],
               "gpus": entries, "nvswitches": switches, "xids_total": log.get("xids_total"),
               "xids_dropped": log["xids_dropped"]}
    if status == PASS:
        codes: Counter[int] = Counter()
        for entry in entries:
            codes[entry["xid"]] += entry["count"]
        return finding(PASS, "no hardware XID (%s); %d application-level XID(s) listed: %s" % (
            window, sum(codes.values()), ", ".join("%d x%d" % item for item in sorted(codes.items()))), details)
    top = [e for e in entries + switches if e["status"] == status]
    message = "; ".join(_event_phrase(e) for e in top[:3])
    more = " (and %d more)" % (len(top) - 3) if len(top) > 3 else ""
    actions = list(OrderedDict.fromkeys(
        advice for action, advice in _ACTION_ADVICE.items() if any(e["nvidia_action"] == action for e in top)))
    remediation = "Drain the node, then %s; events stay in this check until they age out of the %d h window." % (
        "; ".join(actions) or "investigate the codes in NVIDIA's XID catalogue", log["window_hours"])
    return finding(status, "%s%s (%s)" % (message, more, window), details, remediation=remediation)


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
    gate = _vendor_gate(probes)
    if gate:
        return gate
    want_width, want_gen = _expect.get(expect, PCIE_WIDTH), _expect.get(expect, PCIE_GEN)
    results = []
    gpus = _gpus(probes)
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
        detail = _detail(gpu, width=width, target_width=target_width, gen=gen, target_gen=target_gen,
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
    return _verdict(_with_unreadable(results, gpus, _READS_PCIE_LINK),
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
    gate = _vendor_gate(probes)
    if gate:
        return gate
    threshold = _expect.get(expect, PCIE_REPLAY_WARN)
    results = []
    counts: list[dict[str, Any]] = []
    gpus = _gpus(probes)
    for gpu in gpus:
        replays, rollovers = gpu["pcie"]["replay_counter"], gpu["pcie"]["replay_rollover_counter"]
        if replays is None:
            continue
        if gpu.get("vendor") == "amd":
            _counted(counts, gpu, replays)
            results.append(amd_checks.replay_growth(gpu))
            continue
        detail = _detail(gpu, replays=replays, rollovers=rollovers)
        _counted(counts, gpu, replays)
        if rollovers:
            results.append((WARN, detail, "PCIe replay counter rolled over %d time(s)" % rollovers))
        elif replays > threshold:
            results.append((WARN, detail, "%d PCIe replays (over %d)" % (replays, threshold)))
        else:
            results.append((PASS, detail, "%d PCIe replays" % replays))
    found = _verdict(_with_unreadable(results, gpus, _READS_PCIE_REPLAY), "PCIe replays within %d on %d GPU(s)" % (threshold, len(results)),
                     "Reseat the GPU, riser or cable; a rising replay count means a marginal link.",
                     skip_message="no GPU reports PCIe replays")
    return _with_counts(counts, found)


# Clock event reasons: which are a verdict, and which merely explain a clock.
_BENIGN_REASONS = ("gpu_idle", "applications_clocks_setting", "display_clocks_setting", "sync_boost", "sw_power_cap")
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
    gpus = _gpus(probes)
    for gpu in gpus:
        reasons = gpu["clock_event_reasons"]
        if all(on is None for on in reasons.values()):
            continue  # nothing readable: not judged
        active = sorted(reason for reason, on in reasons.items() if on)
        detail = _detail(gpu, active_reasons=active)
        thermal = [r for r in active if r in _THERMAL_REASONS]
        brake = [r for r in active if r == "hw_power_brake_slowdown" or (r == "hw_slowdown" and "hw_thermal_slowdown" not in active)]
        if brake:
            results.append((FAIL, detail, "clocks held down by %s" % ", ".join(brake)))
        elif thermal:
            results.append((WARN, detail, "thermal slowdown active (%s)" % ", ".join(thermal)))
        else:
            results.append((PASS, detail, ", ".join(active) or "none active"))
    return _verdict(_with_unreadable(results, gpus, _READS_CLOCK_THROTTLE_REASONS), "no harmful clock throttle reason active on %d GPU(s)" % len(results),
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
    gate = _vendor_gate(probes)
    if gate:
        return gate
    warn_at = _expect.get(expect, TEMPERATURE_WARN)
    results = []
    gpus = _gpus(probes)
    for gpu in gpus:
        if _vgpu(gpu):
            results.append(_vgpu_skip(gpu))
            continue
        temp = gpu["temperature"]
        if temp["gpu_c"] is None and temp["tlimit_c"] is None:
            continue
        to_slowdown = _headroom(temp, temp["slowdown_c"], temp["slowdown_tlimit_c"])
        to_max = _headroom(temp, temp["max_operating_c"], temp["max_operating_tlimit_c"])
        detail = _detail(gpu, temperature_c=temp["gpu_c"], memory_c=temp["memory_c"], to_slowdown_c=to_slowdown,
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
    return _verdict(_with_unreadable(results, gpus, _READS_TEMPERATURE), "temperatures below their limits on %d GPU(s)" % len(results),
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
    gate = _vendor_gate(probes)
    if gate:
        return gate
    results = []
    gpus = _gpus(probes)
    for gpu in gpus:
        if _vgpu(gpu):
            results.append(_vgpu_skip(gpu))
            continue
        watts = gpu["power"]
        if watts["limit_w"] is None:
            continue
        detail = _detail(gpu, draw_w=watts["draw_w"], limit_w=watts["limit_w"], default_limit_w=watts["default_limit_w"])
        if watts["default_limit_w"] is not None and watts["limit_w"] < watts["default_limit_w"] - 0.5:
            results.append((WARN, detail, "power capped: limit %s W below the default %s W" % (
                watts["limit_w"], watts["default_limit_w"])))
        else:
            results.append((PASS, detail, "%s of %s W" % (watts["draw_w"], watts["limit_w"])))
    return _verdict(_with_unreadable(results, gpus, _READS_POWER), "power limits at their defaults on %d GPU(s)" % len(results),
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
    gate = _vendor_gate(probes)
    if gate:
        return gate
    results = []
    gpus = _gpus(probes)
    for gpu in gpus:
        if _vgpu(gpu):
            results.append(_vgpu_skip(gpu))
            continue
        current, top = gpu["clocks"]["sm_mhz"], gpu["max_clocks"]["sm_mhz"]
        app, default = gpu["applications_clocks"]["graphics_mhz"], gpu["default_applications_clocks"]["graphics_mhz"]
        if current is None and app is None:
            continue
        detail = _detail(gpu, sm_mhz=current, max_sm_mhz=top, application_mhz=app, default_application_mhz=default)
        power_bound = gpu["clock_event_reasons"].get("sw_power_cap")
        if app is not None and default is not None and app < default:
            results.append((WARN, detail, "application clocks lowered to %s of the default %s MHz" % (app, default)))
        elif _busy(gpu, expect) and current and top and current < BUSY_CLOCK_FLOOR * top and not power_bound:
            results.append((WARN, detail, "SM clock %s of %s MHz while busy (%s %%)" % (
                current, top, gpu["utilization"]["gpu_pct"])))
        else:
            results.append((PASS, detail, "SM %s of %s MHz" % (current, top)))
    return _verdict(_with_unreadable(results, gpus, _READS_CLOCKS), "clocks as configured on %d GPU(s)" % len(results),
                    "Reset application clocks with `nvidia-smi -rac -i <index>`; for a slow busy GPU read "
                    "gpu.clock_throttle_reasons and gpu.temperature.",
                    skip_message="no GPU reports clocks")


# ---------------------------------------------------------------- fabric


def _by_uuid_or_index(gpus: Iterable[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    table = {}
    for gpu in gpus:
        table[gpu["uuid"]] = gpu
        table[gpu["index"]] = gpu
    return table


@check("gpu.nvlink", "NVLink links", requires=("nvidia_smi", "nvlink"))
def nvlink(probes: Probes, expect: Expect) -> Finding:
    """Reads the state (and, from nvidia-smi, speed) of every NVLink link of every GPU.

    FAIL when some links of a GPU are inactive while others are up, or when an SXM GPU has no
    active link; WARN when no link is active on a PCIe board (no bridge fitted?), when a link
    state is unreadable, or when a link runs slower than the others. PASS when all links are up
    at one speed; SKIP on GPUs without NVLink.

    Remediation: reset the GPUs; on NVSwitch systems check gpu.fabric_manager; reseat NVLink
    bridges on PCIe boards.
    """
    known = _by_uuid_or_index(_gpus(probes))
    results = []
    for linked in probes["nvlink"]["data"]["gpus"]:
        links = linked["links"]
        if not links:
            continue
        gpu = known.get(linked["uuid"]) or known.get(linked["index"]) or {
            "index": linked["index"], "uuid": linked["uuid"], "name": linked["name"], "pci_bus_id": None}
        down = [link["link"] for link in links if link["active"] is False]
        unknown = [link["link"] for link in links if link["active"] is None]
        speeds = sorted(set(link["speed_gbps"] for link in links if link["speed_gbps"] is not None))
        detail = _detail(gpu, links=len(links), inactive=down, unknown=unknown, speeds_gbps=speeds)
        if down and len(down) < len(links):
            results.append((FAIL, detail, "%d of %d links inactive (%s)" % (len(down), len(links), ", ".join(map(str, down)))))
        elif down and "SXM" in (gpu.get("name") or ""):
            results.append((FAIL, detail, "no active NVLink on an SXM GPU (%d links down)" % len(links)))
        elif down:
            results.append((WARN, detail, "no active NVLink (%d links): no bridge fitted?" % len(links)))
        elif unknown:
            results.append((WARN, detail, "state of link(s) %s unreadable" % ", ".join(map(str, unknown))))
        elif len(speeds) > 1:
            results.append((WARN, detail, "links at different speeds: %s GB/s" % ", ".join("%g" % s for s in speeds)))
        else:
            results.append((PASS, detail, "%d links up" % len(links)))
    return _verdict(results, "all NVLink links up on %d GPU(s)" % len(results),
                    {FAIL: "Reset the GPUs; on NVSwitch systems check gpu.fabric_manager; if links stay down, the "
                           "GPU board or baseboard needs service.",
                     WARN: "Check NVLink bridges (PCIe boards) or exclude gpu.nvlink where none is fitted by design."},
                    skip_message="no GPU has NVLink")


@check("gpu.fabric_manager", "Fabric Manager (NVSwitch systems)", requires=("nvidia_smi", "fabric_manager"))
def fabric_manager(probes: Probes, expect: Expect) -> Finding:
    """Reads whether the nvidia-fabricmanager service is active, each GPU's fabric state and status, and the Fabric Manager log.

    On NVSwitch systems: FAIL when the service is not active, or when a GPU reports a fabric
    state other than Completed or a status other than Success (its NVLinks are not usable), or when
    the Fabric Manager log (`fabric_manager_log`, default /var/log/fabricmanager.log) reports a fatal
    NVSwitch error within `xid_window_hours` (naming the NVSwitch PCI address); WARN for a non-fatal
    NVSwitch error or another [ERROR] entry there, and when the service state cannot be read (no
    systemctl) and no GPU reports its fabric state. A missing log is not judged (Fabric Manager may log
    to the journal only). PASS otherwise; SKIP on hosts without NVSwitch.

    Remediation: `systemctl restart nvidia-fabricmanager` (its version must equal the driver's),
    read `journalctl -u nvidia-fabricmanager`, then reset the GPUs; for a fatal NVSwitch error, reboot the node.
    """
    manager = probes["fabric_manager"]["data"]
    state = manager["active_state"]
    gpus = _gpus(probes)
    untrained = [g for g in gpus if (g["fabric"]["state"] not in (None, "Completed")
                                     or g["fabric"]["status"] not in (None, "Success"))]
    reporting = [g for g in gpus if g["fabric"]["state"] is not None]
    details = {"service": manager["service"], "active_state": state, "nvswitches": manager["nvswitches"],
               "gpus": [_detail(g, fabric_state=g["fabric"]["state"], fabric_status=g["fabric"]["status"])
                        for g in (untrained or reporting)]}
    remedy = ("Run `systemctl restart nvidia-fabricmanager` (its version must equal the driver's), read "
              "`journalctl -u nvidia-fabricmanager`, then reset the GPUs.")
    if state is not None and state != "active":
        message = "%s is %s on a host with %d NVSwitch(es)" % (manager["service"], state, len(manager["nvswitches"]))
        return finding(FAIL, message, details, remedy)
    if untrained:
        return finding(FAIL, "%d GPU(s) not on the fabric: %s" % (len(untrained), "; ".join(
            "%s state %s, status %s" % (_label(gpu_ref(g)), g["fabric"]["state"], g["fabric"]["status"])
            for g in untrained[:3])), details, remedy)
    log = manager.get("log") or {}
    switch_errors = log.get("nvswitch_errors") or []
    if log:
        details["log"] = {"path": log.get("path"), "status": log.get("status"), "reason": log.get("reason"),
                          "nvswitch_errors": switch_errors, "errors": (log.get("errors") or [])[-10:],
                          "errors_total": log.get("errors_total", 0)}
    fatal = [e for e in switch_errors if e["fatal"]]
    named = "; ".join("%s error %d x%d on NVSwitch %s" % ("fatal" if e["fatal"] else "non-fatal", e["code"], e["count"],
                                                          e["device"] or "?") for e in (fatal or switch_errors)[:3])
    if fatal:
        return finding(FAIL, "Fabric Manager log %s: %s" % (log["path"], named), details,
                       "Reboot the node to reset the NVSwitches and GPUs, then check `systemctl status nvidia-fabricmanager`; "
                       "if the error returns on the same NVSwitch, the baseboard needs service.")
    if switch_errors or log.get("errors_total"):
        last = log["errors"][-1]["message"] if log.get("errors") else "?"
        phrase = named or "%d [ERROR] entr%s, last: %s" % (log["errors_total"], "y" if log["errors_total"] == 1 else "ies", last)
        return finding(WARN, "Fabric Manager log %s: %s" % (log["path"], phrase), details,
                       "Read the Fabric Manager log; collect `nvidia-bug-report.sh` if NVSwitch errors repeat.")
    if state is None and not reporting:
        return finding(WARN, "cannot tell whether %s runs (no systemctl) and no GPU reports a fabric state"
                       % manager["service"], details, "Check the Fabric Manager service by hand on this host.")
    return finding(PASS, "%s %s; %d of %d GPU(s) report fabric state Completed" % (
        manager["service"], state or "state unknown", len(reporting), len(gpus)), details)

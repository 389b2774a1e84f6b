# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The per-GPU verdict framework of the GPU checks both vendors share: each check judges each GPU to a
(status, detail, phrase) and verdict() makes one finding of them, the worst status with its GPUs named; a GPU
with unreadable values among what a check reads is ERROR (FAIL when lost), a vGPU guest's placeholders SKIP.

Every check judges each GPU against its own hardware limits (the maxima and thresholds nvidia-smi reports)
unless hydra_expect says otherwise, and names the GPUs it is not happy with in details.gpus.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import OUT_OF_RANGE, is_lost
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding, gpu_name, gpu_ref
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS, READ_ABSENT, READ_FAILED, READ_OK, SKIP, WARN, severity, worst

MODES = ("enabled", "disabled")


# The vendor GPU probes: the checks both vendors share (uses=GPU_PROBES) judge the records of each one with data.
GPU_PROBES = ("nvidia_smi", "amd_smi")


def gpu_records(probes: Probes) -> list[dict[str, Any]]:
    """The GPU records of every vendor probe with data, each number beyond range (non-finite, or past 2**64)
    replaced by None and named in ``unreadable`` as "value out of range", so that no check compares or formats it."""
    return [_in_range(gpu) for name in GPU_PROBES if (probes.get(name) or {}).get("status") == READ_OK
            for gpu in probes[name]["data"]["gpus"]]


def vendor_gate(probes: Probes) -> Optional[Finding]:
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


def vendor_envelope(probes: Probes) -> dict[str, Any]:
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


def describe_unreadable(found: Mapping[str, str]) -> str:
    shown = ["%s: %s" % (path, raw) if raw.startswith(OUT_OF_RANGE) else "%s unreadable (%r)" % (path, raw)
             for path, raw in list(found.items())[:3]]
    return ", ".join(shown) + (" (and %d more)" % (len(found) - 3) if len(found) > 3 else "")


def _unreadable_result(gpu: Mapping[str, Any], found: Mapping[str, str]) -> "GpuResult":
    """FAIL when a value says the GPU is lost or needs a reset, else ERROR naming the fields."""
    lost = OrderedDict((path, raw) for path, raw in found.items() if is_lost(raw))
    detail = gpu_detail(gpu, unreadable=dict(found))
    if lost:
        return FAIL, detail, "GPU lost or needing a reset: %s" % describe_unreadable(lost)
    return ERROR, detail, describe_unreadable(found)


def with_unreadable(results: list["GpuResult"], gpus: Sequence[Mapping[str, Any]], fields: Sequence[str]) -> list["GpuResult"]:
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
            out[position] = (status, detail, "%s; also %s" % (phrase, describe_unreadable(found)))
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


def is_vgpu(gpu: Mapping[str, Any]) -> bool:
    """A vGPU guest: nvidia-smi shows placeholders (0 C, 0 MHz) where the host's readings would be."""
    return (gpu.get("virtualization_mode") or "").strip().lower() in ("vgpu", "vsga")


def vgpu_skip(gpu: Mapping[str, Any]) -> "GpuResult":
    return SKIP, gpu_detail(gpu, virtualization_mode=gpu.get("virtualization_mode")), \
        "vGPU guest (virtualization mode %s): its values are placeholders, judge them on the host" % gpu.get(
            "virtualization_mode")


def gpu_detail(gpu: Mapping[str, Any], **values: Any) -> dict[str, Any]:
    out = gpu_ref(gpu)
    if gpu.get("vendor") == "amd":
        out["vendor"] = "amd"  # verdict words the remediation for AMD GPUs (AMD_REMEDIATION)
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


def with_counts(counts: list[dict[str, Any]], found: Finding) -> Finding:
    """Every judged GPU's error count in details.counts_by_gpu (details.gpus names only the GPUs that are not
    PASS), so the fleet report can compare each GPU with its hardware class whatever the verdict."""
    if counts:
        found["details"]["counts_by_gpu"] = counts
    return found


def counted(counts: list[dict[str, Any]], gpu: Mapping[str, Any], count: Optional[int]) -> None:
    if count is not None:
        counts.append(dict(gpu_ref(gpu), count=count))


GpuResult = tuple[str, dict[str, Any], str]  # (status, detail, phrase) of one GPU


def verdict(results: Sequence[GpuResult], pass_message: str, remediation: Union[str, dict[str, str], None],
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
            named = "; ".join("%s: %s" % (gpu_name(result[1]), result[2]) for result in skipped[:3])
            more = " (and %d more)" % (len(skipped) - 3) if len(skipped) > 3 else ""
            return finding(SKIP, named + more, details={"gpus": [result[1] for result in skipped]})
        return finding(SKIP, "nothing readable: %s" % (skip_message or "no GPU reports what this check reads"))
    bad = [r for r in results if r[0] in (WARN, FAIL, ERROR)]
    if not bad:
        return finding(PASS, pass_message, details={"gpus": [result[1] for result in results + skipped]})
    status = worst(r[0] for r in bad)
    top = [r for r in bad if r[0] == status]
    named = "; ".join("%s: %s" % (gpu_name(result[1]), result[2]) for result in top[:3])
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


def expected_choice(expect: Expect, key: str, choices: Sequence[str] = MODES) -> tuple[Optional[str], Optional[Finding]]:
    """(lower-cased expectation or None, ERROR finding when the value is not one of choices)."""
    value = _expect.get(expect, key)
    if value is None:
        return None, None
    if value.strip().lower() not in choices:
        return None, finding(ERROR, "expect.%s: %r is not one of: %s" % (key, value, ", ".join(choices)),
                             remediation="Set hydra_expect.%s to one of: %s." % (key, ", ".join(choices)))
    return value.strip().lower(), None


def parse_mode(text: Optional[str]) -> Optional[str]:
    value = (text or "").strip().lower()
    return value if value in MODES else None

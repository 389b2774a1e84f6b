# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Active checks (doctor's deep level): judgements of measurements made under load.

The probes (probes/active.py) run the work in worker processes with a deadline; these checks are pure
functions of what they measured. The rule is DCGM's targeted tests': FAIL below a fraction of the expected
figure, the fraction configurable per check in ``hydra_expect``. The expected figure comes from the SKU table
(_host/gpus/skus.py, every figure with its source); for a GPU the table does not know, the best GPU of the same
model on this host is the expectation (a slow one among peers still shows).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.levels import DEEP
from ansible_collections.continuum.hydra.plugins.module_utils._host import idle
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import skus
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding, gpu_name, gpu_ref
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS, READ_OK, SKIP, WARN, worst

MATMUL_MIN_FRACTION = _expect.key("matmul_min_fraction")
GPU_MEMORY_MIN_FRACTION = _expect.key("gpu_memory_bandwidth_min_fraction")
PCIE_MIN_FRACTION = _expect.key("pcie_bandwidth_min_fraction")
PCIE_GEN = _expect.key("pcie_gen")
PCIE_WIDTH = _expect.key("pcie_width")
ALLREDUCE_BUSBW = _expect.key("allreduce_busbw_gbps")
ALLREDUCE_MIN_FRACTION = _expect.key("allreduce_min_fraction")
HOST_MEMORY_MIN_FRACTION = _expect.key("host_memory_bandwidth_min_fraction")
MEMORY_TRIAD_MIN = _expect.key("memory_triad_gbps_min")

# Largest error of a GPU's product against the CPU's fp32 product, relative to the largest value of the product
# (1024x1024 standard normal inputs). fp32 with TF32 off differs from the CPU by summation order only (~1e-6);
# bf16 rounds inputs and output to 8 bits of mantissa (~1e-3). Corrupted results are off by far more.
TOLERANCE = {"fp32": 1e-3, "bf16": 3e-2}

GUARD_PROBE = "node_idle"
GPU_PROBE = "gpu_active"
MEMORY_PROBE = "memory_active"
SMI_PROBE = "nvidia_smi"  # the host's GPUs, to tell a GPU the worker never measured


def _gpus(probes: Probes) -> list[dict[str, Any]]:
    return list((probes[GPU_PROBE]["data"] or {}).get("gpus") or [])


def _not_run(probes: Probes) -> list[str]:
    return list((probes[GPU_PROBE]["data"] or {}).get("not_run") or [])


def _figure(value: Any) -> Optional[float]:
    """A measured figure as a float; None for anything else (missing, a bool, a string, NaN, an infinity)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _not_a_figure(value: Any) -> bool:
    """A figure the worker wrote that is a number but not a measurement (NaN, an infinity): never judged healthy."""
    return isinstance(value, float) and not math.isfinite(value)


def _bus_key(bus_id: Any) -> Optional[tuple[int, str]]:
    """A PCI bus id in either spelling (nvidia-smi's 00000000:18:00.0, sysfs' 0000:18:00.0) -> (domain, rest)."""
    parts = str(bus_id or "").strip().lower().split(":", 1)
    try:
        return (int(parts[0], 16), parts[1]) if len(parts) == 2 else None
    except ValueError:
        return None


def _uuid_key(uuid: Any) -> Optional[str]:
    text = str(uuid or "").strip().lower()
    return text[4:] if text.startswith("gpu-") else text or None


def _unmeasured(probes: Probes) -> list[tuple[str, str]]:
    """(ERROR, message) for each GPU nvidia-smi lists that the worker's answer leaves out (torch saw fewer GPUs:
    one lost to CUDA, or hidden by CUDA_VISIBLE_DEVICES). Matched by UUID or PCI bus id, else by count."""
    envelope = probes.get(SMI_PROBE) or {}
    if envelope.get("status") != READ_OK:
        return []
    listed = [gpu for gpu in (envelope.get("data") or {}).get("gpus") or [] if isinstance(gpu, Mapping)]
    measured = _gpus(probes)
    uuids = set(_uuid_key(gpu.get("uuid")) for gpu in measured) - {None}
    buses = set(_bus_key(gpu.get("pci_bus_id")) for gpu in measured) - {None}
    if uuids or buses:
        missing = [gpu for gpu in listed
                   if _uuid_key(gpu.get("uuid")) not in uuids and _bus_key(gpu.get("pci_bus_id")) not in buses]
    else:
        missing = listed[len(measured):]
    if not missing:
        return []
    return [(ERROR, "%s: listed by nvidia-smi, not measured by the worker (torch saw %d of %d GPUs; "
                    "CUDA_VISIBLE_DEVICES or a GPU lost to CUDA)" % (gpu_name(gpu), len(measured), len(listed)))
            for gpu in missing]


def _failed_step(value: Any) -> Optional[str]:
    """The error a worker step recorded ({"error": ...}), None when the step measured."""
    return value.get("error") if isinstance(value, Mapping) and value.get("error") else None


def _deadline_note(probes: Probes, what: str) -> Optional[Finding]:
    """ERROR when the worker's deadline left GPUs unmeasured for this check (an unmeasured GPU is never healthy)."""
    missed = [step for step in _not_run(probes) if what in step]
    if missed:
        return finding(ERROR, "not measured before the worker's deadline: %s" % ", ".join(missed), {"not_run": missed},
                       remediation="raise timeouts.total (or run fewer checks with only:) so the active GPU work fits")
    return None


def expected_figure(gpu: Mapping[str, Any], key: str, peers: Sequence[Mapping[str, Any]],
                    sku_figure: Optional[float], sku_source: str) -> tuple[Optional[float], str]:
    """The figure a GPU should reach: the SKU table's, else the best GPU of the same model here (None with 1 GPU)."""
    if sku_figure:
        return sku_figure, sku_source
    same = [float(p[key]) for p in peers if p.get("name") == gpu.get("name") and _figure(p.get(key)) is not None]
    if len(same) >= 2:
        return max(same), "the best %s on this host (no SKU figure)" % gpu.get("name")
    return None, "no SKU figure for %s and no peer of the same model" % gpu.get("name")


def _sku_matmul(gpu: Mapping[str, Any]) -> tuple[Optional[float], str]:
    sku = skus.find_sku(gpu.get("name"))
    if sku is None:
        return None, ""
    if sku.get("bf16_tflops_measured"):
        return sku["bf16_tflops_measured"], "%s bf16 matmul measured (%s)" % (sku["label"], sku["sources"].get("bf16_tflops_measured"))
    if sku.get("bf16_tflops_peak"):
        return (sku["bf16_tflops_peak"] * skus.MEASURED_OF_PEAK,
                "%s bf16 datasheet peak x %g" % (sku["label"], skus.MEASURED_OF_PEAK))
    return None, ""


def _sku_memory(gpu: Mapping[str, Any]) -> tuple[Optional[float], str]:
    sku = skus.find_sku(gpu.get("name"))
    if sku is None:
        return None, ""
    if sku.get("memory_bandwidth_measured_tbps"):
        return (sku["memory_bandwidth_measured_tbps"] * 1000.0,
                "%s device memory measured by DCGM (%s)" % (sku["label"], sku["sources"].get("memory_bandwidth_measured_tbps")))
    if sku.get("memory_bandwidth_tbps"):
        return (sku["memory_bandwidth_tbps"] * 1000.0 * skus.MEASURED_OF_PEAK,
                "%s datasheet memory bandwidth x %g" % (sku["label"], skus.MEASURED_OF_PEAK))
    return None, ""


def _verdict(results: Sequence[tuple[str, str]], details: dict[str, Any], pass_message: str,
             remediation: Optional[str]) -> Finding:
    """results: (status, message) per problem; PASS with pass_message when there is none."""
    if not results:
        return finding(PASS, pass_message, details)
    status = worst(status for status, _message in results)
    messages = [message for result_status, message in results if result_status == status]
    others = len(results) - len(messages)
    text = "; ".join(messages) + ("; and %d lesser problem(s) in details" % others if others else "")
    return finding(status, text, dict(details, problems=[{"status": s, "message": m} for s, m in results]),
                   remediation=remediation)


# ---------------------------------------------------------------- the idle guard

@check("system.node_idle", "Node idle before the active checks load it", requires=(GUARD_PROBE,), level=DEEP)
def node_idle(probes: Probes, expect: Expect) -> Finding:
    """Reads, right before each of the deep level's active probes, the node's GPU compute processes (`nvidia-smi
    --query-compute-apps`; on AMD the processes under /sys/class/kfd/kfd/proc) and, where SLURM's squeue is installed,
    the jobs holding the node (`squeue -w <node> -t RUNNING,COMPLETING,SUSPENDED,CONFIGURING`; the node is doctor's
    `slurm_node`, else SLURMD_NODENAME, else the short host name; the job doctor runs in does not count).

    PASS when nothing occupied the node at any reading: the active checks ran. SKIP when a job or a GPU process does:
    the active checks (DCGM, RVS, hydra's own) were not run and SKIP naming it, so a user's job is never loaded; a
    node that becomes busy between two active probes is SKIP too, naming the probe before which it was found (that
    probe and the ones after it were not run). WARN when doctor's `force` option ran them on a busy node, or on one it
    could not read (the figures may be low). ERROR when what occupies the node could not be read (squeue fails,
    slurmctld does not know the node name, nvidia-smi cannot list processes or prints a process line it cannot read):
    the active checks were not run (from that reading on).
    Remediation: screen the node when it is idle (playbooks/screen.yml submits an exclusive SLURM job), or drain it
    first; set `slurm_node` when the node's SLURM name is not its host name.
    """
    data = probes[GUARD_PROBE]["data"] or {}
    busy = idle.occupants(data)
    slurm = data.get("slurm")
    where = "node %s" % data.get("node") if slurm else "this host (no squeue: not a SLURM node)"
    unconfirmed = [str(text) for text in data.get("unconfirmed") or []]
    rechecks = [recheck for recheck in data.get("rechecks") or [] if isinstance(recheck, dict)]
    details = {"node": data.get("node"), "slurm_jobs": (slurm or {}).get("jobs"), "own_job": (slurm or {}).get("own_job"),
               "gpu_processes": data.get("gpu_processes"), "unconfirmed": unconfirmed, "force": bool(data.get("force")),
               "rechecks": rechecks}
    if data.get("force") and (busy or unconfirmed):
        return finding(WARN, "force: the active checks ran on %s although %s; their figures may be low" % (
            where, "; ".join(busy + ["unread: %s" % text for text in unconfirmed])), details,
            remediation="screen the node when it is idle (playbooks/screen.yml) before trusting a low figure")
    if busy:
        return finding(SKIP, "%s is busy (%s): the active checks were not run" % (where, "; ".join(busy)), details)
    later = next((recheck for recheck in rechecks if recheck.get("refused")), None)
    if later is not None and later.get("occupants"):
        return finding(SKIP, "%s became busy before probe %s (%s): it and the active probes after it were not run" % (
            where, later.get("before"), "; ".join(str(text) for text in later["occupants"])), details)
    if later is not None:
        return finding(ERROR, "%s could not be read before probe %s: %s: it and the active probes after it were not run" % (
            where, later.get("before"), later.get("unread") or later["refused"]), details,
            remediation="see why the node could not be read (squeue, nvidia-smi); screen it when it is idle")
    return finding(PASS, "no GPU compute process and no job on %s: the active checks ran" % where, details)


# ---------------------------------------------------------------- matmul consistency

def _bitwise_outliers(gpus: Sequence[Mapping[str, Any]], precision: str) -> list[tuple[Mapping[str, Any], str]]:
    """GPUs whose checksum differs from the majority of their model's GPUs: (gpu, majority checksum)."""
    by_model: dict[str, list[tuple[Mapping[str, Any], str]]] = {}
    for gpu in gpus:
        result = (gpu.get("consistency") or {}).get(precision) if isinstance(gpu.get("consistency"), Mapping) else None
        if isinstance(result, Mapping) and result.get("checksum"):
            by_model.setdefault(str(gpu.get("name")), []).append((gpu, str(result["checksum"])))
    out: list[tuple[Mapping[str, Any], str]] = []
    for members in by_model.values():
        counts = Counter(checksum for _gpu, checksum in members)
        majority, votes = counts.most_common(1)[0]
        if votes * 2 > len(members):
            out.extend((gpu, majority) for gpu, checksum in members if checksum != majority)
        elif len(counts) > 1:
            # No majority (two GPUs that disagree): each one is named, the tolerance tells which is wrong.
            out.extend((gpu, "") for gpu, _checksum in members)
    return out


@check("gpu.matmul_consistency", "Same seeded matmul on every GPU: results agree, TFLOP/s as expected",
       requires=(GPU_PROBE,), uses=(SMI_PROBE,), level=DEEP)
def matmul_consistency(probes: Probes, expect: Expect) -> Finding:
    """Reads the active GPU worker's seeded matmul (1024x1024, fp32 with TF32 off and bf16) on every GPU, its
    result checksum and largest error against the same product computed on the CPU in fp32, and each GPU's
    sustained bf16 matmul TFLOP/s.

    FAIL when a GPU's product is off the CPU reference by more than the tolerance (relative 1e-3 fp32, 3e-2
    bf16), when its bits differ from the majority of the GPUs of its model (deterministic cuBLAS gives the
    same bits on the same model), when the matmul raised an error, or when its bf16 TFLOP/s is below
    `matmul_min_fraction` (default 0.75) of the expected figure (SKU table's measured bf16 matmul, else 0.8x
    the datasheet peak, else the best GPU of the same model here); WARN when two GPUs of one model disagree
    bitwise with no majority but both within tolerance; ERROR when the worker's deadline left a GPU unmeasured,
    when nvidia-smi lists a GPU the worker did not measure, or a figure is NaN or infinite (a NaN or infinite
    product error is a FAIL); SKIP without torch or without a GPU torch can see.
    Remediation: drain the node; run the vendor's diagnostics (dcgmi diag -r 3) on the GPU named and RMA it.
    """
    gpus = _gpus(probes)
    late = _deadline_note(probes, "consistency") or _deadline_note(probes, "bf16_tflops")
    fraction = float(_expect.get(expect, MATMUL_MIN_FRACTION))
    problems: list[tuple[str, str]] = []
    rows = []
    for gpu in gpus:
        row = dict(gpu_ref(gpu), consistency=gpu.get("consistency"), bf16_tflops=gpu.get("bf16_tflops"),
                   fp32_tflops=gpu.get("fp32_tflops"))
        rows.append(row)
        if gpu.get("error"):
            problems.append((FAIL, "%s: %s" % (gpu_name(gpu), gpu["error"])))
            continue
        consistency = gpu.get("consistency")
        error = _failed_step(consistency)
        if error:
            problems.append((FAIL, "%s: the seeded matmul failed: %s" % (gpu_name(gpu), error)))
        elif isinstance(consistency, Mapping):
            for precision, tolerance in TOLERANCE.items():
                result = consistency.get(precision)
                error_value = result.get("max_rel_error") if isinstance(result, Mapping) else None
                if _not_a_figure(error_value):
                    # NaN or inf in the product (or its error): the GPU computed garbage.
                    problems.append((FAIL, "%s: %s product off the CPU reference by %s (not finite)" % (gpu_name(gpu), precision, error_value)))
                elif (_figure(error_value) or 0.0) > tolerance:
                    problems.append((FAIL, "%s: %s product off the CPU reference by %.2g (tolerance %g)"
                                     % (gpu_name(gpu), precision, _figure(error_value) or 0.0, tolerance)))
        tflops = gpu.get("bf16_tflops")
        if _failed_step(tflops):
            problems.append((FAIL, "%s: bf16 matmul failed: %s" % (gpu_name(gpu), _failed_step(tflops))))
        elif _not_a_figure(tflops):
            problems.append((ERROR, "%s: bf16 matmul measured %s TFLOP/s, not a figure" % (gpu_name(gpu), tflops)))
        elif _figure(tflops) is not None:
            measured = _figure(tflops) or 0.0
            sku_figure, sku_source = _sku_matmul(gpu)
            expected, source = expected_figure(gpu, "bf16_tflops", gpus, sku_figure, sku_source)
            row.update(expected_bf16_tflops=expected, expected_source=source, min_fraction=fraction)
            if expected and measured < fraction * expected:
                problems.append((FAIL, "%s: bf16 matmul %.1f TFLOP/s, below %g x %.1f expected (%s)"
                                 % (gpu_name(gpu), measured, fraction, expected, source)))
    problems += _unmeasured(probes)
    for precision in TOLERANCE:
        for outlier, majority in _bitwise_outliers(gpus, precision):
            if majority:
                problems.append((FAIL, "%s: %s result differs bitwise from the other %s GPUs"
                                 % (gpu_name(outlier), precision, outlier.get("name"))))
            else:
                problems.append((WARN, "%s: %s result differs bitwise from another %s with no majority to tell which is right"
                                 % (gpu_name(outlier), precision, outlier.get("name"))))
    details = {"gpus": rows, "tolerance": TOLERANCE, "seed": (probes[GPU_PROBE]["data"] or {}).get("seed"),
               "check_n": (probes[GPU_PROBE]["data"] or {}).get("check_n"), "steps": (probes[GPU_PROBE]["data"] or {}).get("steps")}
    if late is not None and not any(status in (FAIL, ERROR) for status, _message in problems):
        return finding(late["status"], late["message"], dict(details, **late["details"]), remediation=late["remediation"])
    return _verdict(problems, details, "%d GPU(s) agree bitwise and with the CPU reference; bf16 matmul as expected" % len(gpus),
                    "drain the node; run the vendor's diagnostics (dcgmi diag -r 3) on the GPU named and replace it if it repeats")


# ---------------------------------------------------------------- device memory bandwidth

@check("gpu.memory_bandwidth", "Device memory bandwidth (device-to-device copy) as expected", requires=(GPU_PROBE,), uses=(SMI_PROBE,),
       level=DEEP)
def memory_bandwidth(probes: Probes, expect: Expect) -> Finding:
    """Reads the active GPU worker's device-to-device copy bandwidth per GPU (read + write bytes counted).

    FAIL when a GPU is below `gpu_memory_bandwidth_min_fraction` (default 0.75, DCGM's memory bandwidth rule)
    of the expected figure (DCGM's measured figure for the SKU, else 0.8x the datasheet bandwidth, else the best
    GPU of the same model here), or when the copy raised an error; ERROR when the worker's deadline left a GPU
    unmeasured, nvidia-smi lists a GPU the worker did not measure, or a figure is NaN or infinite; PASS otherwise
    (with the figure and no judgement when nothing is known to compare with);
    SKIP without torch or without a GPU torch can see.
    Remediation: check the GPU's clocks and throttle reasons (nvidia-smi -q -d PERFORMANCE); a GPU that stays
    slow needs the vendor's memory diagnostics (dcgmi diag -r 3).
    """
    gpus = _gpus(probes)
    fraction = float(_expect.get(expect, GPU_MEMORY_MIN_FRACTION))
    problems: list[tuple[str, str]] = []
    rows = []
    unjudged = 0
    for gpu in gpus:
        value = gpu.get("memory_bandwidth_gbps")
        row = dict(gpu_ref(gpu), memory_bandwidth_gbps=value, min_fraction=fraction)
        rows.append(row)
        error = gpu.get("error") or _failed_step(value)
        if error:
            problems.append((FAIL, "%s: device copy failed: %s" % (gpu_name(gpu), error)))
            continue
        if _not_a_figure(value):
            problems.append((ERROR, "%s: device memory measured %s GB/s, not a figure" % (gpu_name(gpu), value)))
            continue
        measured = _figure(value)
        if measured is None:
            continue
        sku_figure, sku_source = _sku_memory(gpu)
        expected, source = expected_figure(gpu, "memory_bandwidth_gbps", gpus, sku_figure, sku_source)
        row.update(expected_gbps=expected, expected_source=source)
        if expected is None:
            unjudged += 1
        elif measured < fraction * expected:
            problems.append((FAIL, "%s: device memory %.0f GB/s, below %g x %.0f GB/s expected (%s)"
                             % (gpu_name(gpu), measured, fraction, expected, source)))
    problems += _unmeasured(probes)
    late = _deadline_note(probes, "device copy")
    if late is not None and not problems:
        return late
    message = "%d GPU(s) at or above %g x the expected device memory bandwidth" % (len(gpus) - unjudged, fraction)
    if unjudged:
        message += "; %d GPU(s) measured with no figure to compare with" % unjudged
    return _verdict(problems, {"gpus": rows}, message,
                    "check clocks and throttle reasons (nvidia-smi -q -d PERFORMANCE); a GPU that stays slow needs "
                    "the vendor's memory diagnostics (dcgmi diag -r 3)")


# ---------------------------------------------------------------- PCIe under load

@check("gpu.pcie_under_load", "PCIe host<->GPU bandwidth and link state under load", requires=(GPU_PROBE,), uses=(SMI_PROBE,),
       level=DEEP)
def pcie_under_load(probes: Probes, expect: Expect) -> Finding:
    """Reads the active GPU worker's pinned host-to-device and device-to-host copy GB/s per GPU, and the PCIe link
    generation and width re-read from sysfs while the copies run (a link that idles at a lower rate to save power
    must train up under load).

    FAIL when, under load, the link's width is below `pcie_width` (default: the link's max width; so x8 of a x16
    link is FAIL unless `pcie_width` is 8) or its generation below `pcie_gen` (default: the link's max), or when
    the slower copy direction is below `pcie_bandwidth_min_fraction` (default 0.6) of the link's one-way rate
    at the expected generation and width; WARN when the link could not be read under load (no sysfs entry);
    ERROR when the worker's deadline left a GPU unmeasured, nvidia-smi lists a GPU the worker did not measure,
    or a copy figure is NaN or infinite; SKIP without torch or without a GPU torch can see.
    Remediation: reseat the GPU or its riser, check the slot's BIOS link settings (Gen, bifurcation), and
    the GPU's placement (x8 slot, PCIe switch).
    """
    gpus = _gpus(probes)
    fraction = float(_expect.get(expect, PCIE_MIN_FRACTION))
    want_gen, want_width = _expect.get(expect, PCIE_GEN), _expect.get(expect, PCIE_WIDTH)
    problems: list[tuple[str, str]] = []
    rows = []
    for gpu in gpus:
        pcie = gpu.get("pcie")
        row = dict(gpu_ref(gpu), pcie=pcie, link_idle=gpu.get("link_idle"), min_fraction=fraction)
        rows.append(row)
        error = gpu.get("error") or _failed_step(pcie)
        if error:
            problems.append((FAIL, "%s: pinned copies failed: %s" % (gpu_name(gpu), error)))
            continue
        if not isinstance(pcie, Mapping):
            continue
        link = pcie.get("link_under_load") or {}
        gen_expected = want_gen or link.get("gen_max")
        width_expected = want_width or link.get("width_max")
        row.update(expected_gen=gen_expected, expected_width=width_expected)
        if not link.get("samples") or link.get("width_min") is None or link.get("gen_min") is None:
            problems.append((WARN, "%s: PCIe link not readable under load (sysfs of %s)" % (gpu_name(gpu), gpu.get("pci_bus_id"))))
        else:
            if width_expected and link["width_min"] < width_expected:
                problems.append((FAIL, "%s: PCIe link x%d of x%d under load%s" % (
                    gpu_name(gpu), link["width_min"], width_expected, "" if want_width else " (set pcie_width: 8 for a x8 slot)")))
            if gen_expected and link["gen_min"] < gen_expected:
                problems.append((FAIL, "%s: PCIe link Gen%d of Gen%d under load" % (gpu_name(gpu), link["gen_min"], gen_expected)))
        rate = skus.link_rate_gbps(gen_expected, width_expected)
        copies = [float(pcie[key]) for key in ("h2d_gbps", "d2h_gbps") if _figure(pcie.get(key)) is not None]
        row["link_rate_gbps"] = rate
        broken = [key for key in ("h2d_gbps", "d2h_gbps") if _not_a_figure(pcie.get(key))]
        if broken:
            problems.append((ERROR, "%s: pinned copies measured %s, not a figure" % (
                gpu_name(gpu), ", ".join("%s %s" % (key, pcie[key]) for key in broken))))
        if rate and copies and min(copies) < fraction * rate:
            problems.append((FAIL, "%s: pinned copies %.1f GB/s (slower direction), below %g x %.1f GB/s of Gen%s x%s"
                             % (gpu_name(gpu), min(copies), fraction, rate, gen_expected, width_expected)))
    problems += _unmeasured(probes)
    late = _deadline_note(probes, "pcie")
    if late is not None and not problems:
        return late
    return _verdict(problems, {"gpus": rows, "source": skus.PCIE_SOURCE},
                    "%d GPU(s) keep their PCIe link under load and copy at or above %g x its rate" % (len(gpus), fraction),
                    "reseat the GPU or its riser; check the slot's BIOS link settings (Gen, bifurcation) and the GPU's placement")


# ---------------------------------------------------------------- all-reduce

@check("gpu.allreduce_local", "All-reduce bus bandwidth across the host's GPUs", requires=(GPU_PROBE,), uses=(SMI_PROBE,),
       level=DEEP)
def allreduce_local(probes: Probes, expect: Expect) -> Finding:
    """Reads the active GPU worker's all-reduce over every GPU of the host from one process (torch.cuda.nccl:
    NCCL, or RCCL on ROCm), as nccl-tests' bus bandwidth (algbw x 2(n-1)/n).

    FAIL when the all-reduce raised an error or its bus bandwidth is below `allreduce_min_fraction` (default 0.75)
    of the expected figure: `allreduce_busbw_gbps`, else the SKU table's NVLink ring figure (nccl-tests), else the
    slowest GPU's PCIe one-way link rate (a ring over PCIe cannot beat it); ERROR when the worker's deadline left it
    unmeasured, it gave no finite bus bandwidth, or nvidia-smi lists a GPU it left out; PASS otherwise; SKIP with
    one GPU, without torch or without a GPU torch can see.
    Remediation: check `nvidia-smi topo -m` and `nvidia-smi nvlink -s` (an NVLink down sends traffic over PCIe),
    Fabric Manager on NVSwitch systems, and NCCL_P2P_DISABLE / ACS settings; rerun with NCCL_DEBUG=INFO.
    """
    data = probes[GPU_PROBE]["data"] or {}
    gpus = _gpus(probes)
    result = data.get("allreduce")
    late = _deadline_note(probes, "all-reduce")
    if late is not None:
        return late
    if result is None:
        return finding(SKIP, "%d GPU(s): an all-reduce needs at least two" % len(gpus), {"gpus": len(gpus)})
    if _failed_step(result):
        return finding(FAIL, "all-reduce across %d GPUs failed: %s" % (len(gpus), _failed_step(result)), {"allreduce": result},
                       remediation="rerun with NCCL_DEBUG=INFO; check nvidia-smi topo -m, NVLink state and Fabric Manager")
    fraction = float(_expect.get(expect, ALLREDUCE_MIN_FRACTION))
    expected, source = _allreduce_expected(gpus, expect)
    busbw = _figure(result.get("busbw_gbps"))
    details = {"allreduce": result, "expected_busbw_gbps": expected, "expected_source": source, "min_fraction": fraction}
    label = "%s all-reduce over %d GPUs: bus bandwidth %.1f GB/s" % (str(result.get("backend") or "nccl").upper(), len(gpus), busbw or 0.0)
    if busbw is None:
        return finding(ERROR, "all-reduce across %d GPUs measured no bus bandwidth: %r" % (len(gpus), result.get("busbw_gbps")), details)
    missing = _unmeasured(probes)
    if missing:
        return finding(ERROR, "%s; not a verdict on the host: %s" % (label, "; ".join(message for dummy, message in missing)),
                       dict(details, problems=[{"status": s, "message": m} for s, m in missing]))
    if expected is None:
        return finding(PASS, "%s (no figure to compare with: %s)" % (label, source), details)
    if busbw < fraction * expected:
        return finding(FAIL, "%s, below %g x %.0f GB/s expected (%s)" % (label, fraction, expected, source), details,
                       remediation="check nvidia-smi topo -m and nvidia-smi nvlink -s (a link down sends traffic over PCIe), "
                                   "Fabric Manager on NVSwitch systems, NCCL_P2P_DISABLE and PCIe ACS; rerun with NCCL_DEBUG=INFO")
    return finding(PASS, "%s, at or above %g x %.0f GB/s expected (%s)" % (label, fraction, expected, source), details)


def _allreduce_expected(gpus: Sequence[Mapping[str, Any]], expect: Expect) -> tuple[Optional[float], str]:
    if _expect.given(expect, ALLREDUCE_BUSBW):
        return float(_expect.get(expect, ALLREDUCE_BUSBW)), "hydra_expect.allreduce_busbw_gbps"
    found = [skus.find_sku(gpu.get("name")) for gpu in gpus]
    figures = set(sku.get("allreduce_busbw_gbps") for sku in found if sku is not None)
    figure = figures.pop() if len(figures) == 1 else None
    if figure is not None and all(found):
        sku = found[0] or {}
        return float(figure), "%s NVLink ring (%s)" % (sku.get("label"), sku.get("sources", {}).get("allreduce_busbw_gbps"))
    rates = []
    for gpu in gpus:
        link = ((gpu.get("pcie") or {}) if isinstance(gpu.get("pcie"), Mapping) else {}).get("link_under_load") or {}
        rate = skus.link_rate_gbps(link.get("gen_max"), link.get("width_max"))
        if rate:
            rates.append(rate)
    if rates and len(rates) == len(gpus):
        return min(rates), "the slowest GPU's PCIe one-way link rate, a bound for a ring over PCIe (%s)" % skus.ALLREDUCE_PCIE_SOURCE
    return None, "no SKU figure, no hydra_expect.allreduce_busbw_gbps and no PCIe link rate"


# ---------------------------------------------------------------- host memory bandwidth

@check("system.memory_bandwidth", "Host memory bandwidth (STREAM triad) against a compiled-C reference",
       requires=(MEMORY_PROBE,), level=DEEP)
def host_memory_bandwidth(probes: Probes, expect: Expect) -> Finding:
    """Reads the host STREAM triad (NumPy, best over 1..N threads, arrays 4x the last-level cache) and the same
    machine's compiled-C STREAM triad (cc -O3, OpenMP when available, best over 1..N threads).

    FAIL when both triads are below `memory_triad_gbps_min` (default 10 GB/s: the memory itself is slow), or when
    the NumPy triad is below `host_memory_bandwidth_min_fraction` (default 0.5) of the C triad (the training
    process's Python gets much less than compiled code: a starved or mis-built NumPy). NumPy cannot fuse the triad
    into one pass over memory: on healthy hosts it reaches 0.7-0.95x of the C triad (benchmarks/memory_vs_c_stream.py),
    hence half as the rule. Without a C compiler, FAIL when the NumPy triad is below `memory_triad_gbps_min`; PASS
    otherwise; SKIP without NumPy.
    Remediation: look for other processes using memory bandwidth (top, perf stat), CPU frequency and power
    settings (cpupower frequency-info), and the job's CPU pinning; check the DIMM population (dmidecode -t memory).
    """
    data = probes[MEMORY_PROBE]["data"] or {}
    numpy_run = data.get("numpy") or {}
    reference = data.get("c_reference")
    triad = numpy_run.get("triad_gbps")
    details = {"numpy": numpy_run, "c_reference": reference, "c_reference_reason": data.get("c_reference_reason"),
               "array_bytes": data.get("array_bytes"), "notes": data.get("notes", [])}
    remediation = ("look for other processes using memory bandwidth (top, perf stat), CPU frequency settings "
                   "(cpupower frequency-info) and the job's CPU pinning; check the DIMM population (dmidecode -t memory)")
    if not isinstance(triad, (int, float)):
        return finding(ERROR, "the NumPy triad gave no figure: %r" % (numpy_run,), details)
    if reference and isinstance(reference.get("triad_gbps"), (int, float)) and reference["triad_gbps"] > 0:
        fraction = float(_expect.get(expect, HOST_MEMORY_MIN_FRACTION))
        ratio = triad / reference["triad_gbps"]
        details.update(ratio=round(ratio, 3), min_fraction=fraction)
        floor = float(_expect.get(expect, MEMORY_TRIAD_MIN))
        details.update(min_gbps=floor)
        text = ("STREAM triad %.1f GB/s (%s threads), %.2f x the compiled-C triad %.1f GB/s (%s threads)"
                % (triad, numpy_run.get("threads"), ratio, reference["triad_gbps"], reference.get("threads")))
        # The floor is for the memory: the best either measured (a compiler without OpenMP runs C on one thread).
        if max(triad, reference["triad_gbps"]) < floor:
            return finding(FAIL, "%s: both below memory_triad_gbps_min %g GB/s" % (text, floor), details,
                           remediation=remediation)
        if ratio < fraction:
            return finding(FAIL, "%s, below %g" % (text, fraction), details, remediation=remediation)
        return finding(PASS, text, details)
    floor = float(_expect.get(expect, MEMORY_TRIAD_MIN))
    details.update(min_gbps=floor)
    text = "STREAM triad %.1f GB/s (%s threads); no C reference (%s)" % (triad, numpy_run.get("threads"), data.get("c_reference_reason"))
    if triad < floor:
        return finding(FAIL, "%s: below memory_triad_gbps_min %g GB/s" % (text, floor), details, remediation=remediation)
    return finding(PASS, "%s: at or above memory_triad_gbps_min %g GB/s" % (text, floor), details)

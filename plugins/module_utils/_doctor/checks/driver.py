# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU driver and visibility checks: nvidia-smi, the driver and CUDA versions, the kernel module, NVML, the GPUs
on the PCI bus against what the driver lists, their count and model (NVIDIA, with the AMD branches of amd.py).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import amd as amd_checks
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.per_gpu import GPU_PROBES, gpu_records, vendor_envelope, vendor_gate
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import pci_key
from ansible_collections.continuum.hydra.plugins.module_utils._host.versions import compare, dotted
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding, gpu_name, gpu_ref
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS, READ_ABSENT, READ_FAILED, READ_OK, SKIP, WARN

GPU_COUNT = _expect.key("gpu_count")
GPU_MODEL = _expect.key("gpu_model")
DRIVER_MIN = _expect.key("driver_min")
DRIVER_MAX = _expect.key("driver_max")
CUDA_MIN = _expect.key("cuda_min")


def _version_bounds(expect: Expect, *keys: str) -> tuple[dict[str, tuple[str, tuple[int, ...]]], Optional[Finding]]:
    """({key: (text, tuple)} of the version expectations given, ERROR finding naming a bad one or None)."""
    bounds = {}
    for key in keys:
        text = _expect.get(expect, key)
        if text is None:
            continue
        parsed = dotted(text)
        if parsed is None:
            return {}, finding(ERROR, "expect.%s: %r is not a dotted version such as 535.104.05" % (key, text),
                               remediation="Quote the version in hydra_expect.%s, e.g. \"535.104.05\"." % key)
        bounds[key] = (text, parsed)
    return bounds, None


def _models(gpus: Iterable[Mapping[str, Any]]) -> str:
    return ", ".join("%dx %s" % (count, name) for name, count in sorted(Counter(g["name"] for g in gpus).items()))


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
    gate = vendor_gate(probes)
    if gate:
        return gate
    smi = vendor_envelope(probes)
    version = smi["data"]["driver_version"]
    bounds, bad = _version_bounds(expect, DRIVER_MIN, DRIVER_MAX)
    if bad:
        return bad
    parsed = dotted(version)
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
    if DRIVER_MIN in bounds and compare(parsed, bounds[DRIVER_MIN][1]) < 0:
        return finding(FAIL, "driver %s is older than driver_min %s" % (version, bounds[DRIVER_MIN][0]), details,
                       remediation="Upgrade the NVIDIA driver to %s or newer." % bounds[DRIVER_MIN][0])
    if DRIVER_MAX in bounds and compare(parsed, bounds[DRIVER_MAX][1]) > 0:
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
    parsed = dotted(version)
    if parsed is None:
        return finding(SKIP, "nvidia-smi reports no CUDA version (%r)" % version)
    details = {"cuda_version": version, "cuda_min": bounds.get(CUDA_MIN, (None,))[0]}
    if CUDA_MIN in bounds and compare(parsed, bounds[CUDA_MIN][1]) < 0:
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
    smi_uuids = set(g["uuid"] for g in gpu_records(probes))
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
    gpus = gpu_records(probes)
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
    smi = vendor_envelope(probes)
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
            "%s is %s" % (gpu_name(gpu_ref(g)), g["name"]) for g in wrong[:3])), {"gpus": [gpu_ref(g) for g in wrong]},
            remediation="Move the host to the group matching its GPUs, or fix hydra_expect.gpu_model.")
    if not gpus:
        return finding(FAIL, "no GPU visible where %s GPUs are expected" % want,
                       remediation="Check driver.nvidia_smi and the kernel log.")
    return finding(PASS, "all %d GPUs are %s" % (len(gpus), want), {"gpus": [gpu_ref(g) for g in gpus]})

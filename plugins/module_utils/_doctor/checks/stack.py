# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Checks of the software stack: Python environment, CUDA toolkit, PyTorch and NCCL.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.registry import Expect, Finding, Probes, check
from ansible_collections.continuum.hydra.plugins.module_utils._host.versions import major_version, matches_prefix, version_tuple
from ansible_collections.continuum.hydra.plugins.module_utils._results import finding
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL, PASS, READ_ABSENT, READ_OK, SKIP, WARN

MIN_PYTHON = (3, 9)

TORCH_REQUIRED = _expect.key("torch_required")
TORCH_VERSION = _expect.key("torch_version")
TORCH_CUDA_VERSION = _expect.key("torch_cuda_version")


# ---------------------------------------------------------------- helpers

def nvidia_gpu_count(probes: Mapping[str, Any]) -> Optional[int]:
    """GPUs nvidia-smi lists: an int (0 when there is no nvidia-smi), None when it failed."""
    smi = probes.get("nvidia_smi") or {}
    if smi.get("status") == READ_OK:
        return len((smi.get("data") or {}).get("gpus") or [])
    if smi.get("status") == READ_ABSENT:
        return 0
    return None


def driver_cuda_version(probes: Mapping[str, Any]) -> Optional[str]:
    smi = probes.get("nvidia_smi") or {}
    return (smi.get("data") or {}).get("cuda_version") if smi.get("status") == READ_OK else None


def torch_unusable(torch: Mapping[str, Any]) -> Optional[Finding]:
    """A SKIP finding when torch cannot be judged further (not installed / does not import), else None."""
    if not torch.get("installed"):
        return finding(SKIP, "PyTorch is not installed for %s" % torch.get("python"))
    if torch.get("import_error"):
        return finding(SKIP, "PyTorch does not import (see pytorch.installed): %s" % torch["import_error"])
    return None


def torch_label(torch: Mapping[str, Any]) -> str:
    return "torch %s" % torch.get("version")


# ---------------------------------------------------------------- environment

@check("environment.python_version", "Python version of the target", requires=("host",))
def python_version(probes: Probes, expect: Expect) -> Finding:
    """Reads the version and path of the Python running the module.

    FAIL when it is older than 3.9 (the oldest the collection supports) or unreadable; PASS otherwise,
    naming the version and interpreter path. The torch interpreter is reported by pytorch.installed.
    Remediation: point `ansible_python_interpreter` at a Python 3.9 or newer.
    """
    host = probes["host"]["data"]
    version, executable = host.get("python_version"), host.get("python_executable")
    details = {"python_version": version, "python_executable": executable}
    parsed = version_tuple(version)
    remediation = "point ansible_python_interpreter at a Python 3.9 or newer"
    if parsed is None:
        return finding(FAIL, "cannot tell the Python version of %s (%r)" % (executable, version), details, remediation=remediation)
    if parsed[:2] < MIN_PYTHON:
        return finding(FAIL, "Python %s at %s is older than 3.9" % (version, executable), details, remediation=remediation)
    return finding(PASS, "Python %s (%s)" % (version, executable), details)


@check("environment.venv", "Isolated Python environment", requires=("host",), uses=("torch",))
def venv(probes: Probes, expect: Expect) -> Finding:
    """Reads the prefix of the interpreter that runs PyTorch (`torch_python`, else the module's own).

    PASS for a virtualenv, a conda environment, or any interpreter inside a container (the image is the
    isolation); WARN for the system interpreter of a host, where pip installs mix with the OS packages.
    Remediation: create a virtualenv (`python3 -m venv`) or conda environment for ML work and set `torch_python`.
    """
    host = probes["host"]["data"]
    torch = probes["torch"]["data"] if probes["torch"]["status"] == READ_OK else None
    if torch:
        python, prefix, base, conda = torch.get("python"), torch.get("prefix"), torch.get("base_prefix"), torch.get("conda")
    else:
        python, prefix, base = host.get("python_executable"), host.get("sys_prefix"), host.get("sys_base_prefix")
        conda = bool(host.get("conda_prefix"))
    details = {"python": python, "prefix": prefix, "base_prefix": base}
    if conda:
        return finding(PASS, "conda environment at %s" % prefix, dict(details, kind="conda"))
    if prefix and base and prefix != base:
        return finding(PASS, "virtualenv at %s" % prefix, dict(details, kind="venv"))
    if host.get("is_container"):
        return finding(PASS, "system interpreter %s inside a %s container" % (python, host.get("container_runtime") or "container"),
                       dict(details, kind="container"))
    return finding(WARN, "system interpreter %s: pip installs there mix with the OS packages" % python,
                   dict(details, kind="system"),
                   remediation="create a virtualenv (python3 -m venv) or conda environment for ML work and set torch_python to it")


@check("environment.runtime", "Runtime: container, WSL or VM", requires=("host",))
def runtime(probes: Probes, expect: Expect) -> Finding:
    """Reads the host probe's container, WSL and hypervisor detection (/.dockerenv, /run/.containerenv,
    /proc/1/cgroup, KUBERNETES_SERVICE_HOST, the CPU hypervisor flag, DMI vendor and product).

    Always PASS: informational, naming what was detected (GPU passthrough problems are judged by the
    GPU checks; this says where to look).
    """
    host = probes["host"]["data"]
    parts = []
    if host.get("container_runtime"):
        parts.append("%s container" % host["container_runtime"])
    if host.get("is_wsl"):
        parts.append("WSL")
    if host.get("is_vm"):
        parts.append("VM (%s)" % host.get("hypervisor"))
    keys = ("is_container", "container_runtime", "is_wsl", "is_vm", "hypervisor", "dmi_vendor", "dmi_product", "kernel")
    details = dict((k, host.get(k)) for k in keys)
    return finding(PASS, " on ".join(parts) if parts else "bare metal", details)


# ---------------------------------------------------------------- CUDA

@check("cuda.toolkit_nvcc", "CUDA toolkit (nvcc)", requires=("nvcc",), uses=("nvidia_smi", "torch"))
def toolkit_nvcc(probes: Probes, expect: Expect) -> Finding:
    """Reads `nvcc --version` (nvcc on PATH, else /usr/local/cuda/bin), the driver's CUDA version from
    nvidia-smi and the CUDA version of the PyTorch build.

    SKIP without a CUDA toolkit (PyTorch wheels bring their own CUDA runtime). WARN when the toolkit's
    major version is newer than the driver supports (what it builds will not run), or differs from the
    major CUDA version torch was built with (building PyTorch CUDA extensions fails); PASS otherwise.
    Remediation: install the CUDA toolkit matching torch's CUDA major version and no newer than the driver.
    """
    nvcc = probes["nvcc"]["data"]
    release = nvcc.get("release")
    details = {"path": nvcc.get("path"), "release": release, "version": nvcc.get("version"), "build": nvcc.get("build")}
    driver = driver_cuda_version(probes)
    torch = probes["torch"]["data"] if probes["torch"]["status"] == READ_OK else {}
    torch_cuda = torch.get("cuda_build")
    major = major_version(release)
    problems = []
    driver_major = major_version(driver)
    if major is not None and driver_major is not None and major > driver_major:
        problems.append("newer than the driver's CUDA %s" % driver)
    if major is not None and major_version(torch_cuda) is not None and major != major_version(torch_cuda):
        problems.append("major version differs from torch's CUDA %s (CUDA extensions will not build)" % torch_cuda)
    details.update({"driver_cuda_version": driver, "torch_cuda_build": torch_cuda})
    message = "nvcc %s (%s)" % (nvcc.get("version"), nvcc.get("path"))
    if problems:
        return finding(WARN, "%s: %s" % (message, "; ".join(problems)), details,
                       remediation="install the CUDA toolkit matching torch's CUDA major version, no newer than the driver supports")
    return finding(PASS, message, details)


@check("cuda.torch_cuda_version", "CUDA version of the PyTorch build", requires=("torch",))
def torch_cuda_version(probes: Probes, expect: Expect) -> Finding:
    """Reads `torch.version.cuda` (and `torch.version.hip`) from the torch probe.

    PASS naming the CUDA version torch was built for; WARN when `torch_cuda_version` is expected and the
    build differs (or is CPU-only); SKIP for a CPU-only build when nothing is expected, and when torch is
    not installed.
    Remediation: install the torch wheel built for the expected CUDA version (e.g. the cu124 index).
    """
    torch = probes["torch"]["data"]
    unusable = torch_unusable(torch)
    if unusable:
        return unusable
    build, want = torch.get("cuda_build"), _expect.get(expect, TORCH_CUDA_VERSION)
    details = {"torch_version": torch.get("version"), "cuda_build": build, "hip_build": torch.get("hip_build"),
               "expected": want}
    remediation = "install the torch wheel built for CUDA %s" % want
    if want and not matches_prefix(build, want):
        what = ("built for CUDA %s" % build) if build else "a CPU-only build"
        return finding(WARN, "%s is %s, expected CUDA %s" % (torch_label(torch), what, want), details, remediation=remediation)
    if not build:
        if torch.get("hip_build"):
            return finding(PASS, "%s is a ROCm build (HIP %s)" % (torch_label(torch), torch["hip_build"]), details)
        return finding(SKIP, "%s is a CPU-only build (no CUDA)" % torch_label(torch), details)
    return finding(PASS, "%s built for CUDA %s" % (torch_label(torch), build), details)


@check("cuda.driver_cuda_compat", "Driver supports torch's CUDA", requires=("torch",), uses=("nvidia_smi",))
def driver_cuda_compat(probes: Probes, expect: Expect) -> Finding:
    """Reads the CUDA version torch was built for and the highest CUDA version the driver supports
    (`cuda_version` of nvidia-smi).

    FAIL when torch's CUDA major version is newer than the driver's (CUDA cannot initialise); WARN when
    only the minor version is newer (runs under CUDA minor-version compatibility, without PTX JIT);
    PASS when the driver is new enough; SKIP when either version is unknown (no nvidia-smi, CPU-only torch).
    Remediation: upgrade the NVIDIA driver, or install a torch build for a CUDA version the driver supports.
    """
    torch = probes["torch"]["data"]
    unusable = torch_unusable(torch)
    if unusable:
        return unusable
    build, driver = torch.get("cuda_build"), driver_cuda_version(probes)
    details = {"torch_cuda_build": build, "driver_cuda_version": driver}
    if not build:
        return finding(SKIP, "%s has no CUDA build to compare" % torch_label(torch), details)
    if not driver:
        smi = probes["nvidia_smi"]
        return finding(SKIP, "the driver's CUDA version is unknown (nvidia_smi: %s)" % (smi.get("reason") or "no cuda_version"), details)
    have, need = version_tuple(driver), version_tuple(build)
    if not have or not need:
        return finding(SKIP, "cannot compare CUDA versions %r and %r" % (build, driver), details)
    remediation = "upgrade the NVIDIA driver to one supporting CUDA %s, or install a torch build for CUDA %s or older" % (build, driver)
    if need[0] > have[0]:
        return finding(FAIL, "%s needs CUDA %s but the driver supports only CUDA %s" % (torch_label(torch), build, driver),
                       details, remediation=remediation)
    if need[:2] > have[:2]:
        return finding(WARN, "%s is built for CUDA %s, the driver supports %s: relies on minor-version compatibility (no PTX JIT)"
                       % (torch_label(torch), build, driver), details, remediation=remediation)
    return finding(PASS, "driver supports CUDA %s, %s needs %s" % (driver, torch_label(torch), build), details)


@check("cuda.runtime_hint", "What to do about CUDA for PyTorch", requires=("torch",), uses=("nvidia_smi",))
def runtime_hint(probes: Probes, expect: Expect) -> Finding:
    """Reads the torch probe (build, `cuda.is_available()`, CUDA initialisation warnings,
    CUDA_VISIBLE_DEVICES) and the number of GPUs nvidia-smi lists, and gives one actionable line.

    WARN with the fix when a host with NVIDIA GPUs cannot use them from torch: a CPU-only or ROCm build,
    CUDA_VISIBLE_DEVICES hiding every GPU, a driver too old for the build, or another CUDA initialisation
    error, or nvidia-smi failing; PASS ("no action needed") when torch uses CUDA, or on a host without
    NVIDIA GPUs; SKIP when torch is not installed.
    Remediation: the message names it (install a CUDA build of torch, unset CUDA_VISIBLE_DEVICES, upgrade the driver...).
    """
    torch = probes["torch"]["data"]
    unusable = torch_unusable(torch)
    if unusable:
        return unusable
    gpus, driver = nvidia_gpu_count(probes), driver_cuda_version(probes)
    build, visible = torch.get("cuda_build"), torch.get("cuda_visible_devices")
    details = {"torch_version": torch.get("version"), "cuda_build": build, "cuda_available": torch.get("cuda_available"),
               "nvidia_smi_gpus": gpus, "cuda_visible_devices": visible, "cuda_warnings": torch.get("cuda_warnings") or [],
               "cuda_error": torch.get("cuda_error")}
    if torch.get("cuda_available"):
        return finding(PASS, "%s uses CUDA %s on %d GPU(s): no action needed" % (torch_label(torch), build, torch.get("device_count") or 0), details)
    if gpus is None:
        return finding(WARN, "torch has no CUDA and nvidia-smi failed (%s): fix the driver first" % probes["nvidia_smi"].get("reason"),
                       details, remediation="fix what the driver.* checks report, then run doctor again")
    if not gpus:
        return finding(PASS, "%s without CUDA on a host without NVIDIA GPUs: no action needed" % torch_label(torch), details)
    wheel = ("a CUDA build of torch for CUDA %s or older (e.g. pip install torch --index-url https://download.pytorch.org/whl/cuXYZ)"
             % (driver or "the driver supports"))
    if not build:
        what = "a ROCm build" if torch.get("hip_build") else "a CPU-only build"
        return finding(WARN, "%s is %s on a host with %d NVIDIA GPU(s): install %s" % (torch_label(torch), what, gpus, wheel),
                       details, remediation="install %s" % wheel)
    if visible is not None and visible.strip() in ("", "-1", "none", "NoDevFiles"):
        return finding(WARN, "CUDA_VISIBLE_DEVICES=%r hides every GPU from torch: unset it or list the GPUs" % visible,
                       details, remediation="unset CUDA_VISIBLE_DEVICES or set it to the GPU indices or UUIDs to use")
    reason = torch.get("cuda_error") or next(iter(torch.get("cuda_warnings") or []), None) or "torch.cuda.is_available() is False"
    built_for, supported = version_tuple(build), version_tuple(driver)
    if "too old" in reason.lower() or (driver and built_for and supported and built_for[:2] > supported[:2]):
        return finding(WARN, "the driver (CUDA %s) is too old for %s built for CUDA %s: upgrade the driver or install %s"
                       % (driver, torch_label(torch), build, wheel), details,
                       remediation="upgrade the NVIDIA driver, or install %s" % wheel)
    return finding(WARN, "torch cannot initialise CUDA on this %d-GPU host: %s" % (gpus, reason), details,
                   remediation="check the driver checks (driver.*, gpu.*), the kernel log and /dev/nvidia* permissions")


# ---------------------------------------------------------------- PyTorch

@check("pytorch.installed", "PyTorch installed and importable", requires=("torch",), uses=("nvidia_smi",))
def installed(probes: Probes, expect: Expect) -> Finding:
    """Reads whether `import torch` works in the torch interpreter (`torch_python`, else the module's Python).

    PASS when torch imports; FAIL when it is installed but fails to import (a broken install), or when
    `torch_required` is true and it is missing. When it is missing and `torch_required` is unset: WARN on
    a host where nvidia-smi lists GPUs (a GPU host is there to run ML), SKIP elsewhere; SKIP when
    `torch_required` is false.
    Remediation: `pip install torch` in the training environment (or fix the import error shown).
    """
    torch = probes["torch"]["data"]
    python = torch.get("python")
    details = {"python": python, "python_version": torch.get("python_version"), "version": torch.get("version"),
               "import_error": torch.get("import_error")}
    if torch.get("installed") and torch.get("import_error"):
        return finding(FAIL, "torch is installed for %s but does not import: %s" % (python, torch["import_error"]), details,
                       remediation="reinstall torch in that environment (pip install --force-reinstall torch) and check its CUDA libraries")
    if torch.get("installed"):
        return finding(PASS, "%s (Python %s at %s)" % (torch_label(torch), torch.get("python_version"), python), details)
    required = _expect.get(expect, TORCH_REQUIRED)
    remediation = "pip install torch in the training environment, and set torch_python to its interpreter"
    if required:
        return finding(FAIL, "PyTorch is not installed for %s (torch_required)" % python, details, remediation=remediation)
    gpus = nvidia_gpu_count(probes)
    if required is None and gpus:
        return finding(WARN, "PyTorch is not installed for %s on a host with %d NVIDIA GPU(s)" % (python, gpus), details,
                       remediation=remediation + " (or set hydra_expect.torch_required: false)")
    return finding(SKIP, "PyTorch is not installed for %s" % python, details)


@check("pytorch.cuda_available", "torch.cuda.is_available()", requires=("torch",), uses=("nvidia_smi",))
def cuda_available(probes: Probes, expect: Expect) -> Finding:
    """Reads `torch.cuda.is_available()` and `device_count()` and the number of GPUs nvidia-smi lists.

    PASS when CUDA is available; FAIL when it is not on a host where nvidia-smi lists NVIDIA GPUs;
    WARN when it is not and nvidia-smi failed (GPU presence unknown); SKIP on a host without NVIDIA GPUs
    and when torch is not installed.
    Remediation: follow cuda.runtime_hint (CPU-only build, old driver, CUDA_VISIBLE_DEVICES).
    """
    torch = probes["torch"]["data"]
    unusable = torch_unusable(torch)
    if unusable:
        return unusable
    gpus = nvidia_gpu_count(probes)
    details = {"cuda_available": torch.get("cuda_available"), "device_count": torch.get("device_count"),
               "nvidia_smi_gpus": gpus, "cuda_error": torch.get("cuda_error"), "cuda_warnings": torch.get("cuda_warnings") or []}
    if torch.get("cuda_available"):
        return finding(PASS, "CUDA available to %s: %d device(s)" % (torch_label(torch), torch.get("device_count") or 0), details)
    remediation = "see cuda.runtime_hint: install a CUDA build of torch, upgrade the driver or fix CUDA_VISIBLE_DEVICES"
    if gpus:
        return finding(FAIL, "CUDA is not available to %s although nvidia-smi lists %d GPU(s)" % (torch_label(torch), gpus),
                       details, remediation=remediation)
    if gpus is None:
        return finding(WARN, "CUDA is not available to %s and nvidia-smi failed: %s" % (torch_label(torch), probes["nvidia_smi"].get("reason")),
                       details, remediation=remediation)
    return finding(SKIP, "no NVIDIA GPU on this host (%s has no CUDA device)" % torch_label(torch), details)


@check("pytorch.cuda_version", "PyTorch version and CUDA libraries", requires=("torch",))
def pytorch_cuda_version(probes: Probes, expect: Expect) -> Finding:
    """Reads the torch version, its CUDA build and the cuDNN version torch loads.

    WARN when `torch_version` is expected and the installed version is of another release line, or when
    a CUDA build of torch cannot load cuDNN (convolutions fall back or fail); PASS otherwise, naming
    version, CUDA and cuDNN; SKIP when torch is not installed.
    Remediation: install the expected torch release (`pip install torch==X.Y.*`) with its bundled CUDA libraries.
    """
    torch = probes["torch"]["data"]
    unusable = torch_unusable(torch)
    if unusable:
        return unusable
    version, build, cudnn = torch.get("version"), torch.get("cuda_build"), torch.get("cudnn_version")
    want = _expect.get(expect, TORCH_VERSION)
    details = {"version": version, "cuda_build": build, "cudnn_version": cudnn, "expected": want}
    summary = "torch %s, CUDA %s, cuDNN %s" % (version, build or "none (CPU-only)", cudnn or "none")
    if want and not matches_prefix(version, want):
        return finding(WARN, "%s: expected torch %s" % (summary, want), details,
                       remediation="install torch %s (pip install 'torch==%s.*')" % (want, want))
    if build and not cudnn:
        return finding(WARN, "%s: a CUDA build without a loadable cuDNN" % summary, details,
                       remediation="reinstall torch with its bundled nvidia-cudnn package, or fix LD_LIBRARY_PATH")
    return finding(PASS, summary, details)


@check("gpu.device_properties", "GPUs as PyTorch sees them", requires=("torch",), uses=("nvidia_smi",))
def device_properties(probes: Probes, expect: Expect) -> Finding:
    """Reads `torch.cuda.get_device_properties(i)` of every device: name, compute capability, total memory,
    multiprocessor count, UUID and PCI bus id.

    PASS listing every device; WARN when torch sees fewer devices than nvidia-smi lists while
    CUDA_VISIBLE_DEVICES is unset (a GPU that CUDA cannot initialise), or when a device's properties
    cannot be read; SKIP when torch has no CUDA device or is not installed.
    Remediation: look for the missing GPU in the gpu.* and driver.* checks and the kernel log (Xid).
    """
    torch = probes["torch"]["data"]
    unusable = torch_unusable(torch)
    if unusable:
        return unusable
    devices = torch.get("devices") or []
    if not torch.get("cuda_available") or not devices:
        return finding(SKIP, "%s has no CUDA device to describe" % torch_label(torch))
    gpus = []
    for device in devices:
        entry = {"index": device.get("index"), "pci_bus_id": device.get("pci_bus_id"), "uuid": device.get("uuid"),
                 "name": device.get("name")}
        entry.update(dict((k, device.get(k)) for k in ("capability", "total_memory_bytes", "multi_processor_count", "error")
                          if device.get(k) is not None))
        gpus.append(entry)
    smi_gpus = nvidia_gpu_count(probes)
    details = {"gpus": gpus, "nvidia_smi_gpus": smi_gpus, "cuda_visible_devices": torch.get("cuda_visible_devices")}
    broken = [g for g in gpus if "error" in g]
    if broken:
        return finding(WARN, "torch cannot read the properties of %d of %d device(s): %s" % (len(broken), len(gpus), broken[0]["error"]),
                       details, remediation="check the gpu.* and driver.* checks and the kernel log for these GPUs")
    if smi_gpus and len(gpus) < smi_gpus and torch.get("cuda_visible_devices") is None:
        return finding(WARN, "torch sees %d of the %d GPUs nvidia-smi lists" % (len(gpus), smi_gpus), details,
                       remediation="look for the missing GPU in the gpu.* and driver.* checks and the kernel log (Xid)")
    names = sorted(set("%s (sm_%s, %.0f GiB, %d SMs)" % (
        g["name"], str(g.get("capability", "?")).replace(".", ""), (g.get("total_memory_bytes") or 0) / 2.0 ** 30,
        g.get("multi_processor_count") or 0) for g in gpus))
    return finding(PASS, "%d device(s): %s" % (len(gpus), ", ".join(names)), details)


# ---------------------------------------------------------------- NCCL

def _is_true(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def _is_false(value: str) -> bool:
    return value.strip().lower() in ("0", "false", "no", "off")


# (variable, predicate on its value, why it is risky). Settings NCCL's documentation reserves for
# debugging, or that silently move traffic to a slower path.
RISKY_NCCL = (
    ("NCCL_P2P_DISABLE", _is_true, "disables NVLink/PCIe peer-to-peer between GPUs: intra-node traffic goes through host memory"),
    ("NCCL_P2P_LEVEL", lambda v: v.strip().upper() in ("LOC", "0"), "LOC disables peer-to-peer between GPUs"),
    ("NCCL_SHM_DISABLE", _is_true, "disables the shared-memory transport: traffic without P2P goes over the network"),
    ("NCCL_IB_DISABLE", _is_true, "disables InfiniBand/RoCE: inter-node traffic falls back to TCP sockets"),
    ("NCCL_NET_GDR_LEVEL", lambda v: v.strip().upper() in ("LOC", "0"), "LOC disables GPUDirect RDMA between NIC and GPU"),
    ("NCCL_NVLS_ENABLE", _is_false, "disables NVLink SHARP on NVSwitch systems (slower all-reduce on HGX H100/H200)"),
    ("NCCL_ALGO", lambda v: bool(v.strip()), "forces the collective algorithm; NCCL's tuner chooses better outside debugging"),
    ("NCCL_PROTO", lambda v: bool(v.strip()), "forces the protocol; NCCL's documentation reserves this for debugging"),
    ("NCCL_DEBUG", lambda v: v.strip().upper() == "TRACE", "TRACE logs every call and slows collectives"),
    ("NCCL_SOCKET_IFNAME", lambda v: v.strip() in ("lo", "=lo"), "loopback only: other nodes cannot connect"),
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", _is_false, "a failed rank hangs the job instead of aborting it"),
    ("NCCL_ASYNC_ERROR_HANDLING", _is_false, "a failed rank hangs the job instead of aborting it"),
)


@check("nccl.env_config", "NCCL environment settings", requires=("host",), uses=("infiniband",))
def env_config(probes: Probes, expect: Expect) -> Finding:
    """Reads the NCCL_* and TORCH_NCCL_* variables of the module's environment, then ~/.nccl.conf
    (or NCCL_CONF_FILE) and /etc/nccl.conf, in NCCL's own order of precedence.

    WARN naming each risky setting and why: NCCL_P2P_DISABLE=1, NCCL_P2P_LEVEL=LOC, NCCL_SHM_DISABLE=1,
    NCCL_IB_DISABLE=1 (only where InfiniBand ports exist), NCCL_NET_GDR_LEVEL=LOC, NCCL_NVLS_ENABLE=0,
    a forced NCCL_ALGO or NCCL_PROTO, NCCL_DEBUG=TRACE, NCCL_SOCKET_IFNAME=lo and
    (TORCH_)NCCL_ASYNC_ERROR_HANDLING=0. PASS otherwise (NCCL_DEBUG unset or INFO is fine), listing
    what is set. ERROR when an nccl.conf that exists cannot be read within ``timeouts.command`` (a hung NFS home,
    a FIFO) or at all: what NCCL applies is then unknown.
    Remediation: unset the variable (or remove it from the nccl.conf named) unless it works around a known problem.
    """
    settings = probes["host"]["data"].get("nccl_settings") or {}
    unreadable = probes["host"]["data"].get("nccl_conf_errors") or []
    if unreadable:
        return finding(ERROR, "cannot read the NCCL config: %s" % "; ".join(unreadable), {"settings": settings, "unreadable": unreadable},
                       remediation="make the nccl.conf named readable (check the home directory's mount) or remove it")
    ib = probes["infiniband"]
    has_ib = ib.get("status") == READ_OK and bool((ib.get("data") or {}).get("ports"))
    risky = []
    for name, is_risky, why in RISKY_NCCL:
        setting = settings.get(name)
        if not setting or not is_risky(setting["value"]):
            continue
        if name == "NCCL_IB_DISABLE" and not has_ib:
            continue  # harmless where there is no InfiniBand to disable
        risky.append({"variable": name, "value": setting["value"], "source": setting["source"], "why": why})
    details = {"settings": settings, "risky": risky}
    if risky:
        first = risky[0]
        more = " (and %d more)" % (len(risky) - 1) if len(risky) > 1 else ""
        return finding(WARN, "%s=%s (%s): %s%s" % (first["variable"], first["value"], first["source"], first["why"], more), details,
                       remediation="unset %s unless it works around a known problem" % ", ".join(r["variable"] for r in risky))
    if not settings:
        return finding(PASS, "no NCCL_* settings: NCCL defaults", details)
    return finding(PASS, "%d NCCL setting(s), none risky: %s" % (len(settings), ", ".join(sorted(settings))), details)


@check("nccl.torch_backend", "NCCL backend of torch.distributed", requires=("torch",), uses=("nvidia_smi",))
def torch_backend(probes: Probes, expect: Expect) -> Finding:
    """Reads `torch.distributed.is_available()`, `is_nccl_available()` and `torch.cuda.nccl.version()`.

    PASS naming the NCCL version; FAIL when torch has CUDA devices but no NCCL backend (multi-GPU
    training cannot use NCCL); SKIP for a torch without CUDA (CPU-only build or no GPU: gloo is the
    backend there) and when torch is not installed.
    Remediation: install the official CUDA wheel of torch (it bundles NCCL) instead of a build without distributed/NCCL.
    """
    torch = probes["torch"]["data"]
    unusable = torch_unusable(torch)
    if unusable:
        return unusable
    details = {"distributed_available": torch.get("distributed_available"), "nccl_available": torch.get("nccl_available"),
               "nccl_version": torch.get("nccl_version"), "nccl_error": torch.get("nccl_error")}
    if torch.get("nccl_available"):
        return finding(PASS, "NCCL %s in %s" % (torch.get("nccl_version") or "(version unknown)", torch_label(torch)), details)
    if not torch.get("cuda_build") or not torch.get("cuda_available"):
        return finding(SKIP, "%s has no usable CUDA, so no NCCL backend (gloo only)" % torch_label(torch), details)
    return finding(FAIL, "%s has CUDA devices but no NCCL backend%s" % (
        torch_label(torch), "" if torch.get("distributed_available") else " (torch.distributed is not available)"), details,
        remediation="install the official CUDA wheel of torch, which bundles NCCL")

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Host facts: identity, OS, CPU, memory, Python, runtime (container / WSL / VM) and NCCL settings.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import platform
import socket
import sys

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError, read_text

# Variables NCCL reads, plus PyTorch's own knobs for its NCCL process group.
NCCL_PREFIXES = ("NCCL_", "TORCH_NCCL_")

# Hypervisor names as /sys/class/dmi/id/sys_vendor or product_name spell them.
_DMI_HYPERVISORS = ("QEMU", "KVM", "VMware", "VirtualBox", "Xen", "Microsoft Corporation", "Amazon EC2",
                    "Google", "OpenStack", "Parallels", "Bochs", "BHYVE")


def _read_or_none(path):
    try:
        return read_text(path)
    except (ProbeAbsent, ProbeError, UnicodeDecodeError):
        return None


def parse_os_release(text):
    values = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip('"')
    return values


def parse_cpuinfo(text):
    """CPU model, logical CPU count and whether a hypervisor flag is set."""
    model, count, hypervisor = None, 0, False
    for line in (text or "").splitlines():
        key, dummy, value = line.partition(":")
        key = key.strip()
        if key == "processor":
            count += 1
        elif key == "model name" and model is None:
            model = value.strip()
        elif key == "flags" and " hypervisor" in " " + value:
            hypervisor = True
    return {"model": model, "logical_cpus": count or os.cpu_count(), "hypervisor": hypervisor}


def parse_meminfo_kib(text, key="MemTotal"):
    for line in (text or "").splitlines():
        name, dummy, value = line.partition(":")
        if name == key:
            try:
                return int(value.split()[0])
            except (IndexError, ValueError):
                return None
    return None


def detect_container(proc_1_cgroup, root="/", environ=None):
    """The container runtime this process runs in (docker, podman, kubernetes, ...), or None."""
    environ = os.environ if environ is None else environ
    if environ.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if os.path.exists(os.path.join(root, "run/.containerenv")):
        return "podman"
    if os.path.exists(os.path.join(root, ".dockerenv")):
        return "docker"
    for marker, runtime in (("kubepods", "kubernetes"), ("docker", "docker"), ("libpod", "podman"),
                            ("containerd", "containerd"), ("lxc", "lxc")):
        if marker in (proc_1_cgroup or ""):
            return runtime
    return None


def detect_hypervisor(cpu_hypervisor_flag, dmi_vendor, dmi_product):
    """A name for the hypervisor when the CPU or DMI says this is a VM; None on bare metal."""
    for text in (dmi_product, dmi_vendor):
        for name in _DMI_HYPERVISORS:
            if text and name.lower() in text.lower():
                return text
    return "unknown hypervisor" if cpu_hypervisor_flag else None


def parse_nccl_conf(text):
    """NAME=VALUE lines of an nccl.conf file; comments and blank lines ignored."""
    values = {}
    for line in (text or "").splitlines():
        line = line.split("#", 1)[0].strip()
        name, sep, value = line.partition("=")
        if sep and name.strip():
            values[name.strip()] = value.strip()
    return values


def nccl_settings(environ, conf_files):
    """Effective NCCL settings with where each comes from.

    NCCL applies its config files with setenv(..., overwrite=0): the environment wins over the
    user's file, which wins over /etc/nccl.conf. ``conf_files`` is [(path, text)] in that order.
    """
    settings = {}
    for name, value in environ.items():
        if name.startswith(NCCL_PREFIXES):
            settings[name] = {"value": value, "source": "environment"}
    for path, text in conf_files:
        for name, value in parse_nccl_conf(text).items():
            settings.setdefault(name, {"value": value, "source": path})
    return settings


def _nccl_conf_paths(root, environ):
    user_file = environ.get("NCCL_CONF_FILE") or os.path.join(os.path.expanduser("~"), ".nccl.conf")
    return [user_file, os.path.join(root, "etc/nccl.conf")]


def probe_host(options, root="/", environ=None):
    """Identity and runtime facts; always available, never raises for a missing file."""
    environ = os.environ if environ is None else environ

    def read(path):
        return _read_or_none(os.path.join(root, path))

    os_release = parse_os_release(read("etc/os-release"))
    cpu = parse_cpuinfo(read("proc/cpuinfo"))
    mem_kib = parse_meminfo_kib(read("proc/meminfo"))
    kernel_release = platform.release()
    dmi_vendor = (read("sys/class/dmi/id/sys_vendor") or "").strip() or None
    dmi_product = (read("sys/class/dmi/id/product_name") or "").strip() or None
    container_runtime = detect_container(read("proc/1/cgroup"), root, environ)
    hypervisor = detect_hypervisor(cpu["hypervisor"], dmi_vendor, dmi_product)
    conf_files = [(path, _read_or_none(path)) for path in _nccl_conf_paths(root, environ)]
    return {
        "hostname": socket.gethostname(),
        "os": os_release.get("PRETTY_NAME") or platform.system(),
        "os_id": os_release.get("ID"),
        "os_version_id": os_release.get("VERSION_ID"),
        "kernel": kernel_release,
        "arch": platform.machine(),
        "cpu_model": cpu["model"],
        "logical_cpus": cpu["logical_cpus"],
        "memory_total_bytes": mem_kib * 1024 if mem_kib is not None else None,
        "python_version": platform.python_version(),
        "python_executable": sys.executable,
        "sys_prefix": sys.prefix,
        "sys_base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "conda_prefix": environ.get("CONDA_PREFIX"),
        "virtual_env": environ.get("VIRTUAL_ENV"),
        "is_container": container_runtime is not None,
        "container_runtime": container_runtime,
        "is_wsl": "microsoft" in kernel_release.lower() or os.path.exists(os.path.join(root, "proc/sys/fs/binfmt_misc/WSLInterop")),
        "is_vm": hypervisor is not None,
        "hypervisor": hypervisor,
        "dmi_vendor": dmi_vendor,
        "dmi_product": dmi_product,
        "nccl_settings": nccl_settings(environ, [(path, text) for path, text in conf_files if text is not None]),
    }

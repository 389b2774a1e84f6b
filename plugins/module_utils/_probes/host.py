# -*- coding: utf-8 -*-
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Host facts: identity, OS, CPU, memory, Python and runtime (container / WSL / VM).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import platform
import socket
import sys

from ansible_collections.continuum.hydra.plugins.module_utils._probes._command import ProbeAbsent, ProbeError, read_text


def _read_or_none(path):
    try:
        return read_text(path)
    except (ProbeAbsent, ProbeError):
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
        key, _, value = line.partition(":")
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
        name, _, value = line.partition(":")
        if name == key:
            return int(value.split()[0])
    return None


def detect_container(proc_1_cgroup, root="/"):
    if os.path.exists(os.path.join(root, ".dockerenv")) or os.path.exists(os.path.join(root, "run/.containerenv")):
        return True
    markers = ("docker", "kubepods", "containerd", "libpod", "lxc")
    return any(marker in (proc_1_cgroup or "") for marker in markers)


def probe_host(options):
    """Identity and runtime facts; always available, never raises for a missing file."""
    os_release = parse_os_release(_read_or_none("/etc/os-release"))
    cpu = parse_cpuinfo(_read_or_none("/proc/cpuinfo"))
    mem_kib = parse_meminfo_kib(_read_or_none("/proc/meminfo"))
    kernel_release = platform.release()
    dmi_vendor = (_read_or_none("/sys/class/dmi/id/sys_vendor") or "").strip() or None
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
        "conda_prefix": os.environ.get("CONDA_PREFIX"),
        "virtual_env": os.environ.get("VIRTUAL_ENV"),
        "is_container": detect_container(_read_or_none("/proc/1/cgroup")),
        "is_wsl": "microsoft" in kernel_release.lower() or os.path.exists("/proc/sys/fs/binfmt_misc/WSLInterop"),
        "is_vm": cpu["hypervisor"],
        "dmi_vendor": dmi_vendor,
    }

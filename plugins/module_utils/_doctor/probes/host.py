# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Host facts: identity, OS, CPU, memory, Python, runtime (container / WSL / VM) and NCCL settings.

The NCCL config files sit in home directories and /etc, which can be network mounts: each is read with
``timeouts.command`` as its deadline. A file that cannot be read (a hung NFS home, a FIFO without a writer,
permission denied) does not fail the host facts: it is listed in ``nccl_conf_errors`` and nccl.env_config is ERROR.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import platform
import socket
import sys
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import DEFAULT_COMMAND_TIMEOUT, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text_if_exists, read_text_or_none
from ansible_collections.continuum.hydra.plugins.module_utils._host.procfs import meminfo_kib, parse_cpuinfo, parse_os_release
from ansible_collections.continuum.hydra.plugins.module_utils._host.runtime import detect_container, detect_hypervisor

# Variables NCCL reads, plus PyTorch's own knobs for its NCCL process group.
NCCL_PREFIXES = ("NCCL_", "TORCH_NCCL_")


def parse_nccl_conf(text: Optional[str]) -> dict[str, str]:
    """NAME=VALUE lines of an nccl.conf file; comments and blank lines ignored."""
    values = {}
    for line in (text or "").splitlines():
        line = line.split("#", 1)[0].strip()
        name, sep, value = line.partition("=")
        if sep and name.strip():
            values[name.strip()] = value.strip()
    return values


def nccl_settings(environ: Mapping[str, str], conf_files: list[tuple[str, str]]) -> dict[str, dict[str, str]]:
    """Effective NCCL settings with where each comes from.

    NCCL applies its config files with setenv(..., overwrite=0): the environment wins over the
    user's file, which wins over /etc/nccl.conf. ``conf_files`` is [(path, text)] in that order.
    """
    settings: dict[str, dict[str, str]] = {}
    for name, value in environ.items():
        if name.startswith(NCCL_PREFIXES):
            settings[name] = {"value": value, "source": "environment"}
    for path, text in conf_files:
        for name, value in parse_nccl_conf(text).items():
            settings.setdefault(name, {"value": value, "source": path})
    return settings


def _nccl_conf_paths(root: str, environ: Mapping[str, str]) -> list[str]:
    home = environ.get("HOME") or os.path.expanduser("~")
    user_file = environ.get("NCCL_CONF_FILE") or os.path.join(home, ".nccl.conf")
    return [user_file, os.path.join(root, "etc/nccl.conf")]


def read_nccl_conf_files(paths: list[str], timeout: float) -> tuple[list[tuple[str, str]], list[str]]:
    """([(path, text)] of the files that exist, [one line per file that could not be read]), each read bounded."""
    found, errors = [], []
    for path in paths:
        try:
            text = read_text_if_exists(path, timeout)
        except ProbeError as exc:
            errors.append(str(exc))
            continue
        if text is not None:
            found.append((path, text))
    return found, errors


def probe_host(options: Mapping[str, Any], root: str = "/", environ: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """Identity and runtime facts; always available, never raises for a missing file."""
    environ = os.environ if environ is None else environ

    def read(path: str) -> Optional[str]:
        return read_text_or_none(os.path.join(root, path))

    os_release = parse_os_release(read("etc/os-release"))
    cpu = parse_cpuinfo(read("proc/cpuinfo"))
    mem_kib = meminfo_kib(read("proc/meminfo"))
    kernel_release = platform.release()
    dmi_vendor = (read("sys/class/dmi/id/sys_vendor") or "").strip() or None
    dmi_product = (read("sys/class/dmi/id/product_name") or "").strip() or None
    container_runtime = detect_container(read("proc/1/cgroup"), root, environ)
    hypervisor = detect_hypervisor(cpu["hypervisor"], dmi_vendor, dmi_product)
    timeout = (options.get("timeouts") or {}).get("command", DEFAULT_COMMAND_TIMEOUT)
    conf_files, conf_errors = read_nccl_conf_files(_nccl_conf_paths(root, environ), timeout)
    return {
        "hostname": socket.gethostname(),
        "os": os_release.get("PRETTY_NAME") or platform.system(),
        "os_id": os_release.get("ID"),
        "os_version_id": os_release.get("VERSION_ID"),
        "kernel": kernel_release,
        "boot_id": (read("proc/sys/kernel/random/boot_id") or "").strip() or None,  # changes at each boot
        "arch": platform.machine(),
        "cpu_model": cpu["model"],
        "logical_cpus": cpu["logical_cpus"] or os.cpu_count(),
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
        "nccl_settings": nccl_settings(environ, conf_files),
        "nccl_conf_errors": conf_errors,
    }

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What this host runs in: a container runtime, a hypervisor.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
from collections.abc import Mapping
from typing import Optional

# Hypervisor names as /sys/class/dmi/id/sys_vendor or product_name spell them.
DMI_HYPERVISORS = ("QEMU", "KVM", "VMware", "VirtualBox", "Xen", "Microsoft Corporation", "Amazon EC2",
                   "Google", "OpenStack", "Parallels", "Bochs", "BHYVE")


def detect_container(proc_1_cgroup: Optional[str], root: str = "/", environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
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


def detect_hypervisor(cpu_hypervisor_flag: bool, dmi_vendor: Optional[str], dmi_product: Optional[str]) -> Optional[str]:
    """A name for the hypervisor when the CPU or DMI says this is a VM; None on bare metal."""
    for text in (dmi_product, dmi_vendor):
        for name in DMI_HYPERVISORS:
            if text and name.lower() in text.lower():
                return text
    return "unknown hypervisor" if cpu_hypervisor_flag else None

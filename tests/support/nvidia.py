"""Recorded nvidia-smi output for the GPU checks' tests: the recordings, faults planted by editing copies of them,
and one check run the way doctor runs it."""

import copy
import xml.etree.ElementTree as ET

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import configuration, driver, fabric, health, performance, registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import xid as xid_checks
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import xid
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import parse_nvidia_smi
from ansible_collections.continuum.hydra.tests.support.envelopes import absent, ok
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

RECORDINGS = ("a100-sxm4-v12.xml", "a10g.xml", "quadro-p2000-v12.xml", "rtx-3060-v12.xml", "rtx-3080-v13.xml",
              "rtx-4000-sff-ada-v13.xml", "tesla-t4.xml")
# The checks of the GPU check modules (the ones reading nvidia-smi's records beside amd-smi's).
GPU_CHECKS = [c for c in CATALOGUE if c.func.__module__ in (driver.__name__, configuration.__name__, health.__name__, xid_checks.__name__,
                                                            performance.__name__, fabric.__name__)]
A100_UUID = "GPU-513536b6-7d19-9063-b049-1e69664bb298"
T4_UUID = "GPU-d37e67a5-91dd-3774-a5cb-99096249601a"


def smi(name, *edits, folder="nvidia-smi"):
    """The parsed recording after edits: (path, text) pairs of the first GPU, (path, text, GPU position) triples, or
    callables taking the XML root."""
    root = ET.fromstring(read_fixture(folder, name))
    for edit in edits:
        if callable(edit):
            edit(root)
        else:
            path, text, gpu = edit if len(edit) == 3 else (edit[0], edit[1], 0)
            node = root.findall("gpu")[gpu].find(path)
            assert node is not None, path
            node.text = text
    return parse_nvidia_smi(ET.tostring(root, encoding="unicode"))


def gpus(count):
    """An edit turning the recording into a host with count GPUs: copies of its <gpu>, own bus id and UUID each."""
    def multiply(root):
        original = root.find("gpu")
        for index in range(1, count):
            clone = copy.deepcopy(original)
            bus_id = "00000000:%02X:00.0" % (0x10 + index)
            clone.set("id", bus_id)
            clone.find("pci/pci_bus_id").text = bus_id
            clone.find("uuid").text = original.find("uuid").text[:-4] + "%04d" % index
            root.append(clone)
        root.find("attached_gpus").text = str(count)
    return multiply


def leaves(root):
    """(element, path below <gpu>) of every element with text and no children, in document order."""
    out = []

    def walk(node, path):
        for child in node:
            below = "%s/%s" % (path, child.tag) if path else child.tag
            if len(child) == 0 and (child.text or "").strip():
                out.append((child, below))
            walk(child, below)
    walk(root.find("gpu"), "")
    return out


# What a GPU still shows when nothing else about it can be read: its identity.
IDENTITY = ("product_name", "product_brand", "product_architecture", "uuid", "serial", "board_part_number",
            "vbios_version", "pci_bus_id", "pci_bus", "pci_device", "pci_domain", "pci_device_id", "pci_sub_system_id",
            "minor_number", "gpu_virtualization_mode/virtualization_mode")


def blank_readings(root):
    """An edit: every reading of the first <gpu> N/A, its identity (IDENTITY) kept: a GPU the driver lists but
    cannot query."""
    for node, path in leaves(root):
        if path not in IDENTITY and path.rsplit("/", 1)[-1] not in IDENTITY:
            node.text = "N/A"


def kernel_log(text="", hours=24):
    """What the kernel_log probe returns for a log text, built by the probe's own scan()."""
    return ok(dict(xid.scan(text), source="journalctl", journal_problem=None, window_hours=hours, window_applied=True))


def defaults():
    """What the other probes say on a plain host with one GPU and no NVLink/NVSwitch."""
    return {
        "nvidia_smi": absent("nvidia-smi not found on PATH (no NVIDIA driver installed?)"),
        "nvml": ok({"available": False, "error": "NVMLError_LibraryNotFound: NVML Shared Library Not Found",
                    "driver_version": None, "device_count": None, "devices": []}),
        "nvidia_pci": ok({"gpus": [], "nvswitches": []}),
        "kernel_module": absent("the nvidia kernel module is not loaded"),
        "kernel_log": kernel_log(),
        "nvlink": absent("no GPU on this host has NVLink"),
        "fabric_manager": absent("no NVSwitch on this host: Fabric Manager is not needed"),
        "host": ok({"is_container": False, "is_vm": False, "is_wsl": False}),
        "amd_smi": absent("no AMD GPU: amd-smi and rocm-smi not on PATH and no AMD GPU on the PCI bus"),
    }


def judge(check_id, data=None, expect=None, **envelopes):
    """Run one registered check the way doctor does (gating included) on the given probe data."""
    (chk,) = [c for c in CATALOGUE if c.id == check_id]
    probes = defaults()
    if data is not None:
        probes["nvidia_smi"] = ok(data)
    probes.update(envelopes)
    return registry.evaluate(chk, probes, expect or {})


def named(record):
    return [(g["index"], g["uuid"]) for g in record["details"]["gpus"]]


def recorded(name, first=None, last=None):
    return read_fixture("kernel-log", name).splitlines()[first:last]


def fake_nvidia_smi(tmp_path, body):
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)

"""The one reading of GPUs on the PCI bus (every feature counts and lists GPUs through it) and the PCIe generation table,
on the recorded PCI listing of the CI machine (tests/fixtures/sysfs) with GPU functions planted beside it."""

import os
import threading

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host import pci
from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import torch_worker
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

# (address, vendor, class): an MI300X (a processing accelerator, 0x1200) and its HDMI audio function, an MI210
# (0x0380, other display), an H100 (0x0302, 3D controller), an NVSwitch (0x0680, bridge), a GeForce's VGA and audio
# functions, an Intel VGA function and an AMD (0x1022) CPU function: four GPUs of two vendors and one NVSwitch.
PLANTED = (
    ("0000:05:00.0", "0x1002", "0x120000"), ("0000:05:00.1", "0x1002", "0x040300"),
    ("0000:83:00.0", "0x1002", "0x038000"),
    ("0000:18:00.0", "0x10de", "0x030200"), ("0000:07:00.0", "0x10de", "0x068000"),
    ("0000:65:00.0", "0x10de", "0x030000"), ("0000:65:00.1", "0x10de", "0x040300"),
    ("0000:31:00.0", "0x8086", "0x030000"), ("0000:00:18.3", "0x1022", "0x060000"),
)


def lay_out(root, functions=()):
    """``root``/bus/pci/devices from the recorded GPU-less KVM listing, plus ``functions``; the devices directory."""
    devices = os.path.join(str(root), "bus", "pci", "devices")
    rows = [line.split() for line in read_fixture("sysfs", "kvm-virtio-host-pci.txt").splitlines() if not line.startswith("#")]
    rows += [(address, vendor, "0x74a1", pci_class) for address, vendor, pci_class in functions]
    for bdf, vendor, device, pci_class in rows:
        os.makedirs(os.path.join(devices, bdf))
        for name, value in (("vendor", vendor), ("device", device), ("class", pci_class)):
            with open(os.path.join(devices, bdf, name), "w") as handle:
                handle.write(value + "\n")
    return devices


def test_the_recorded_gpu_less_host_has_no_gpu_function(tmp_path):
    devices = lay_out(tmp_path)
    assert pci.scan_functions(devices) == []
    assert pci.scan_nvidia_functions(devices) == {"gpus": [], "nvswitches": []}
    assert pci.scan_amd_gpus(devices) == [] and pci.scan_amd_gpus(str(tmp_path / "absent")) == []
    assert pci.count_gpus(devices, timeout=10) == (0, None)
    assert pci.count_gpus(str(tmp_path / "absent"), timeout=10) == (0, None)


def test_gpus_of_every_class_and_vendor_are_read_once_for_every_reader(tmp_path):
    devices = lay_out(tmp_path, PLANTED)
    assert [(f["address"], f["vendor"], f["kind"]) for f in pci.scan_functions(devices)] == [
        ("0000:05:00.0", "AMD", "gpus"), ("0000:07:00.0", "NVIDIA", "nvswitches"), ("0000:18:00.0", "NVIDIA", "gpus"),
        ("0000:65:00.0", "NVIDIA", "gpus"), ("0000:83:00.0", "AMD", "gpus")]
    nvidia = pci.scan_nvidia_functions(devices)
    assert [f["address"] for f in nvidia["gpus"]] == ["0000:18:00.0", "0000:65:00.0"]
    assert nvidia["nvswitches"] == [{"address": "0000:07:00.0", "device_id": "0x74a1", "class": "0x068000", "driver": None}]
    amd = [(f["address"], f["class"]) for f in pci.scan_amd_gpus(devices)]
    assert amd == [("0000:05:00.0", "0x120000"), ("0000:83:00.0", "0x038000")]
    # Two of each vendor: the first met (by address) wins the tie; one more AMD GPU decides it.
    assert pci.count_gpus(devices, timeout=10) == (2, "AMD")
    os.makedirs(os.path.join(devices, "0000:95:00.0"))
    for name, value in (("vendor", "0x10de"), ("class", "0x030200")):
        with open(os.path.join(devices, "0000:95:00.0", name), "w") as handle:
            handle.write(value + "\n")
    assert pci.count_gpus(devices, timeout=10) == (3, "NVIDIA")


def test_eight_mi300x_are_eight_amd_gpus(tmp_path):
    # MI300X is a processing accelerator (class 0x1200), not a display controller: counted 0 before.
    devices = lay_out(tmp_path, [("0000:%02x:00.0" % bus, "0x1002", "0x120000") for bus in range(0x05, 0x85, 0x10)])
    assert pci.count_gpus(devices, timeout=10) == (8, "AMD")


@pytest.mark.parametrize("vendor, pci_class, kind", [
    (pci.NVIDIA_VENDOR, "0x030200", "gpus"), (pci.NVIDIA_VENDOR, "0x030000", "gpus"),
    (pci.NVIDIA_VENDOR, "0x068000", "nvswitches"), (pci.NVIDIA_VENDOR, "0x040300", None),
    (pci.NVIDIA_VENDOR, "0x120000", None), (pci.NVIDIA_VENDOR, None, None),
    (pci.AMD_VENDOR, "0x120000", "gpus"), (pci.AMD_VENDOR, "0x038000", "gpus"), (pci.AMD_VENDOR, " 0x0300A0\n", "gpus"),
    (pci.AMD_VENDOR, "0x040300", None), (pci.AMD_VENDOR, "0x068000", None),
])
def test_which_function_of_a_gpu_vendor_is_a_gpu(vendor, pci_class, kind):
    assert pci.classify(pci_class, vendor) == kind


def test_a_listing_that_blocks_is_given_up_at_the_deadline(tmp_path):
    devices = lay_out(tmp_path)
    fifo = os.path.join(devices, "0000:00:01.0", "vendor")
    os.remove(fifo)
    os.mkfifo(fifo)  # opening it for reading blocks until a writer comes, as a hung sysfs read would
    done = []
    reader = threading.Thread(target=lambda: done.append(pci.count_gpus(devices, timeout=0.2)))
    reader.daemon = True
    reader.start()
    reader.join(10)
    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # lets the stuck read return
    assert done == [(None, None)]  # unknown, not "no GPU"


RATES = [(2.5, 1), (5.0, 2), (8.0, 3), (16.0, 4), (32.0, 5), (64.0, 6), (128.0, 7)]


@pytest.mark.parametrize("gts, gen", RATES + [(16, 4), (128, 7), (3.0, None), (256.0, None), (None, None)])
def test_pcie_generation_of_a_transfer_rate(gts, gen):
    assert pci.pcie_gen(gts) == gen


@pytest.mark.parametrize("gts, gen", RATES)
def test_the_torch_workers_copy_of_the_table_agrees(gts, gen):
    # torch_worker runs as `python -c` and imports nothing from the collection: its table is a copy held equal here.
    assert torch_worker.link_gen("%.1f GT/s PCIe" % gts) == gen

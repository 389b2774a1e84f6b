"""The torch worker: the PCIe link read from sysfs, answers without torch for real, and (torch installed) on the CPU."""

import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import torch_worker
from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import worker as _worker

ACTIVE_ARGS = {"mode": "active", "matrix_n": 64, "check_n": 32, "seed": 1, "warmup_s": 0.0, "duration_s": 0.01,
               "device_copy_mib": 1, "transfer_mib": 1, "repeats": 1, "allreduce_mib": 1, "deadline_s": 30}


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


@pytest.mark.parametrize("text, gen", [("2.5 GT/s PCIe", 1), ("8.0 GT/s PCIe", 3), ("16.0 GT/s PCIe", 4), ("32.0 GT/s PCIe", 5),
                                       ("64.0 GT/s PCIe", 6), ("Unknown", None), ("", None), (None, None)])
def test_link_speed_text_to_generation(text, gen):
    assert torch_worker.link_gen(text) == gen


def test_the_link_is_read_from_sysfs_and_unreadable_is_none(tmp_path):
    base = tmp_path / "sys/bus/pci/devices/0000:1b:00.0"
    for name, value in (("current_link_speed", "32.0 GT/s PCIe"), ("current_link_width", "8"),
                        ("max_link_speed", "32.0 GT/s PCIe"), ("max_link_width", "16")):
        write(str(base / name), value + "\n")
    assert torch_worker.read_link("0000:1B:00.0", str(tmp_path)) == {"gen": 5, "width": 8, "gen_max": 5, "width_max": 16}
    assert torch_worker.read_link("0000:99:00.0", str(tmp_path)) == {"gen": None, "width": None, "gen_max": None, "width_max": None}
    assert torch_worker.read_link(None) == {"gen": None, "width": None, "gen_max": None, "width_max": None}


class Props:
    pci_domain_id, pci_bus_id, pci_device_id = 0, 0x1B, 0


def test_bus_id_from_torch_device_properties():
    assert torch_worker.bus_id(Props()) == "0000:1b:00.0"
    assert torch_worker.bus_id(object()) is None


def test_without_torch_every_mode_answers_absent(tmp_path):
    pytest.importorskip("numpy")  # the test venv: no torch there
    try:
        import torch  # noqa: F401  # pylint: disable=import-outside-toplevel,unused-import
        pytest.skip("torch is installed here")
    except ImportError:
        pass
    for args in ({"mode": "inventory"}, ACTIVE_ARGS):
        answer = _worker.run_worker(torch_worker, args, 60, "torch worker")
        assert answer["status"] == "absent" and "torch is not importable" in answer["reason"]


def test_active_mode_on_a_cpu_only_torch_reports_no_cuda():
    torch = pytest.importorskip("torch")
    answer = torch_worker.active(torch, ACTIVE_ARGS)
    assert answer["status"] == "ok" and answer["cuda_available"] is False and answer["gpus"] == []


def test_checksum_tells_bitwise_equal_from_different():
    torch = pytest.importorskip("torch")
    a = torch.randn(16, 16, generator=torch.Generator().manual_seed(3))
    b = a.clone()
    assert torch_worker.checksum(torch, a) == torch_worker.checksum(torch, b)
    b[7, 7] = torch.nextafter(b[7, 7], torch.tensor(1e9))  # one bit of one element
    assert torch_worker.checksum(torch, a) != torch_worker.checksum(torch, b)
    swapped = a.clone()
    swapped[0, 0], swapped[0, 1] = a[0, 1].item(), a[0, 0].item()  # same values, other places
    assert torch_worker.checksum(torch, a) != torch_worker.checksum(torch, swapped)
    assert torch_worker.checksum(torch, a.to(torch.bfloat16)) != torch_worker.checksum(torch, a)

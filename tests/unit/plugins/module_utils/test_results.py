"""How a GPU is named for people (_results.gpu_name): by every identity known, never "None" (issue 29)."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._results import gpu_name, gpu_ref

UUID = "GPU-8ba16ede-b303-d769-7297-d266d9383b89"


@pytest.mark.parametrize("gpu, name", [
    ({"index": 3, "pci_bus_id": "00000000:19:00.0", "uuid": UUID}, "GPU 3 00000000:19:00.0 " + UUID),
    ({"index": 0, "pci_bus_id": None, "uuid": None}, "GPU 0"),  # index 0 is an index, not "no index"
    # the kernel log's GPU nvidia-smi no longer lists: its address, and the UUID the log maps to it when it does
    ({"index": None, "pci_bus_id": "0000:19:00", "uuid": None}, "GPU at 0000:19:00"),
    ({"index": None, "pci_bus_id": "0000:19:00", "uuid": UUID}, "GPU at 0000:19:00 " + UUID),
    ({"index": None, "uuid": UUID}, "GPU " + UUID),
    ({"index": 2, "serial": "1324321000123"}, "GPU 2 serial 1324321000123"),
    ({"index": 2, "uuid": UUID, "serial": "1324321000123"}, "GPU 2 " + UUID),  # the UUID says it: no serial too
    ({"index": None, "pci_bus_id": "", "uuid": None}, "GPU (not named)"),
    ({}, "GPU (not named)"),
])
def test_a_gpu_is_named_by_what_is_known_of_it(gpu, name):
    assert gpu_name(gpu) == name
    assert gpu_name(gpu_ref(gpu)) == gpu_name(dict(gpu, serial=None))  # a finding's reference names it the same way


def test_no_name_says_none():
    for index in (None, 0, 5):
        for address in (None, "", "0000:01:00"):
            for uuid in (None, "", UUID):
                assert "None" not in gpu_name({"index": index, "pci_bus_id": address, "uuid": uuid})

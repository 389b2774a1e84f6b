"""PCIe AER statistics files: procfs' recorded files (kernel 5.x names) and the kernel 4.19 documentation's sample."""

from ansible_collections.continuum.hydra.plugins.module_utils._host import pcie_aer
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLines
from ansible_collections.continuum.hydra.tests.support import interconnect as ic
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

FUNCTIONS = [{"address": "0000:3b:00.0", "kind": "gpu", "name": None}, {"address": "0000:9a:00.0", "kind": "nic", "name": "mlx5_4"}]


def test_both_kernel_spellings_read_as_name_and_count():
    assert pcie_aer.parse_aer(read_fixture("procfs", "aer-01.00.0", "aer_dev_fatal")) == {"total": 0, "errors": {}}
    assert pcie_aer.parse_aer(read_fixture("linux-kernel-docs", "aer_dev_correctable-4.19")) == {
        "total": 2, "errors": {"Receiver Error": 2}}


def test_a_bad_line_is_skipped_and_counted_and_no_total_is_no_total():
    bad = BadLines()
    text = read_fixture("procfs", "aer-01.00.0", "aer_dev_correctable").replace("BadTLP 0", "BadTLP many").replace(
        "TOTAL_ERR_COR 0\n", "")
    assert pcie_aer.parse_aer(text, bad) == {"total": None, "errors": {}}
    assert bad.count == 1 and bad.sample[0]["error"] == "'many' is not a count"


def test_reading_the_functions_of_a_tree(tmp_path):
    root = ic.aer_root(tmp_path, "host", ["0000:3b:00.0"])   # the NIC has no AER files (no AER capability)
    ic.set_aer(root, "0000:3b:00.0", "correctable", 7, "RxErr")
    (root / "sys/bus/pci/devices/0000:3b:00.0/aer_dev_fatal").write_text("Undefined 0\nDLP 0\n")   # no TOTAL line
    data = pcie_aer.read_aer(str(root / "sys/bus/pci/devices"), FUNCTIONS, 10)
    (device,) = data["devices"]
    assert (device["address"], device["correctable"], device["nonfatal"], device["fatal"]) == ("0000:3b:00.0", 7, 0, None)
    assert device["errors"] == {"correctable RxErr": 7}
    assert device["unreadable"] == {"fatal": "%s/sys/bus/pci/devices/0000:3b:00.0/aer_dev_fatal has no TOTAL_ERR_ line" % root}
    assert data["without_aer"] == ["0000:9a:00.0"]
    late = pcie_aer.read_aer(str(root / "sys/bus/pci/devices"), FUNCTIONS, 0)["devices"]
    assert late[0]["unreadable"]["correctable"] == "not read: the 0s deadline of the reading had passed"

"""InfiniBand / RoCE port error counters from GPUd's recorded H100 /sys/class/infiniband tree, faults planted in a copy."""

import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host import ib_counters
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent
from ansible_collections.continuum.hydra.tests.support import interconnect as ic


@pytest.fixture
def root(tmp_path):
    return ic.ib_root(tmp_path, "h100")


def _ports(root, timeout=10):
    return dict(("%s/%s" % (p["device"], p["port"]), p) for p in ib_counters.read_port_counters(str(root), timeout)["ports"])


def test_the_recorded_h100_tree_every_port_its_error_counters_and_the_saturated_ones(root):
    ports = _ports(root)
    assert sorted(ports) == ["mlx5_%d/1" % n for n in (0, 1, 4, 5, 6, 7, 8, 9)] + ["mlx5_bond_0/1"]
    port = ports["mlx5_1/1"]
    assert (port["state"], port["phys_state"], port["rate_gbps"], port["link_layer"], port["fw_ver"]) == (
        "ACTIVE", "LinkUp", 400.0, "InfiniBand", "28.41.1000")
    assert port["counters"]["link_downed"] == 255 and port["counters"]["port_rcv_errors"] == 14
    # 255 is an 8-bit PortCounters counter's maximum, 15 a 4-bit one's: stopped there (saturated), not wrapped.
    assert port["saturated"] == ["link_downed", "excessive_buffer_overrun_errors"] and port["unreadable"] == {}
    assert set(port["counters"]) == set(ib_counters.PORT_COUNTERS) | set(ib_counters.HW_COUNTERS) - {"req_transport_retries_exceeded"}
    assert "port_rcv_data" not in port["counters"]  # data counters are not read
    bond = ports["mlx5_bond_0/1"]
    assert (bond["link_layer"], bond["rate_gbps"], bond["fw_ver"]) == ("Ethernet", 200.0, "32.38.3056")


def test_an_unreadable_counter_is_named_never_zero_and_a_missing_one_is_left_out(root):
    counters = ic.port_dir(root, "mlx5_4") / "counters"
    (counters / "symbol_error").write_text("N/A (no PMA)\n")     # older kernels when the PerfMgt query fails
    (counters / "port_rcv_errors").write_text("0x10\n")
    os.remove(ic.port_dir(root, "mlx5_4") / "hw_counters" / "roce_slow_restart")   # not on this NIC generation
    port = _ports(root)["mlx5_4/1"]
    assert "symbol_error" not in port["counters"] and "port_rcv_errors" not in port["counters"]
    assert port["unreadable"]["symbol_error"].endswith("symbol_error: 'N/A (no PMA)' is not a counter value")
    assert port["unreadable"]["port_rcv_errors"].endswith("port_rcv_errors: '0x10' is not a counter value")
    assert "roce_slow_restart" not in port["counters"] and "roce_slow_restart" not in port["unreadable"]


def test_a_hung_read_costs_one_deadline_for_its_device_and_the_others_are_read(root):
    fifo = ic.port_dir(root, "mlx5_4") / "counters" / "symbol_error"
    os.remove(fifo)
    os.mkfifo(fifo)   # a read that never returns, as a NIC whose firmware stopped answering
    ports = _ports(root, timeout=1.5)
    hung = ports["mlx5_4/1"]
    assert hung["unreadable"]["symbol_error"].endswith("symbol_error: no answer within the deadline")
    assert hung["unreadable"]["link_downed"] == "not read: an earlier read of mlx5_4 timed out"
    assert hung["counters"] == {} and hung["state"] is None and "state" in hung["unreadable"]
    assert ports["mlx5_5/1"]["unreadable"] == {} and ports["mlx5_5/1"]["counters"]["port_rcv_errors"] == 14


def test_past_the_deadline_nothing_more_is_read(root):
    ports = _ports(root, timeout=0)
    assert all(p["counters"] == {} for p in ports.values())
    assert ports["mlx5_0/1"]["unreadable"]["symbol_error"] == "not read: the 0s deadline of the reading had passed"


def test_no_rdma_device_is_absent(tmp_path):
    with pytest.raises(ProbeAbsent):
        ib_counters.read_port_counters(str(tmp_path))
    assert ib_counters.counter_max("link_downed") == 255 and ib_counters.counter_max("rnr_nak_retry_err") is None

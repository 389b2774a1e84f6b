"""Which local interface holds an address (the fabric's torch backends are pointed at it)."""

import socket
import subprocess

from ansible_collections.continuum.hydra.plugins.module_utils._host import network


def test_the_interface_holding_an_address_is_found_by_address_and_by_name():
    assert network.interface_of_address("127.0.0.1") == "lo"
    assert network.interface_of_address("localhost") == "lo"
    names = {name for _index, name in socket.if_nameindex()}
    for name in names - {"lo"}:  # every other interface with an IPv4 address is found by it too
        for address in _ipv4_of(name):
            assert network.interface_of_address(address) == name


def test_an_address_no_interface_holds_or_a_name_that_does_not_resolve_is_none():
    assert network.interface_of_address("192.0.2.254") is None
    assert network.interface_of_address("no-such-host.invalid") is None


def test_ipv6_rows_of_proc_net_if_inet6():
    text = ("00000000000000000000000000000001 01 80 10 80       lo\n"
            "fd000000000000000000000000000002 04 40 00 80     eth0\n")
    assert network._ipv6_interfaces(text) == {"00000000000000000000000000000001": "lo", "fd000000000000000000000000000002": "eth0"}


def _ipv4_of(name):
    """The interface's IPv4 addresses as iproute2 lists them (an independent reading)."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", name], capture_output=True, text=True, check=False).stdout
    return [line.split()[3].split("/")[0] for line in out.splitlines() if len(line.split()) > 3]

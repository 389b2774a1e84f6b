# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""RDMA / InfiniBand ports from /sys/class/infiniband.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import re
import socket
import struct
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import list_dir, read_required_text, read_text_if_exists


def parse_ib_state(text: str, path: str) -> tuple[int, str]:
    """"4: ACTIVE" -> (4, "ACTIVE")."""
    match = re.match(r"^(\d+):\s*(\S.*)$", text.strip())
    if not match:
        raise ProbeError("%s: %r is not 'N: STATE'" % (path, text.strip()[:80]))
    return int(match.group(1)), match.group(2).strip()


def parse_ib_rate_gbps(text: str, path: str) -> float:
    """"100 Gb/sec (4X EDR)" -> 100.0."""
    match = re.match(r"^([\d.]+) Gb/sec", text.strip())
    if not match:
        raise ProbeError("%s: %r is not 'N Gb/sec (...)'" % (path, text.strip()[:80]))
    return float(match.group(1))


def _stripped(path: str) -> Any:
    text = read_text_if_exists(path)
    return text.strip() if text is not None else None


def read_infiniband_ports(root: str = "/") -> list[dict[str, Any]]:
    """State, physical state, rate and link layer of every RDMA port under root's /sys/class/infiniband.

    ProbeAbsent when there is no RDMA device or port; ProbeError naming a file that is unreadable or not in the
    kernel's format. An empty optional file (rate, link_layer, fw_ver) reads as "".
    """
    base = os.path.join(root, "sys/class/infiniband")
    if not os.path.isdir(base):
        raise ProbeAbsent("no InfiniBand/RDMA device: %s does not exist" % base)
    ports = []
    for device in list_dir(base):
        ports_dir = os.path.join(base, device, "ports")
        if not os.path.isdir(ports_dir):
            continue
        fw_ver = _stripped(os.path.join(base, device, "fw_ver"))
        for port in sorted(list_dir(ports_dir), key=lambda p: int(p) if p.isdigit() else -1):
            port_dir = os.path.join(ports_dir, port)
            state_path, phys_path, rate_path = (os.path.join(port_dir, f) for f in ("state", "phys_state", "rate"))
            state = parse_ib_state(read_required_text(state_path), state_path)
            phys = parse_ib_state(read_required_text(phys_path), phys_path)
            rate_text = _stripped(rate_path)
            ports.append({"device": device, "port": int(port) if port.isdigit() else port, "fw_ver": fw_ver,
                          "state": state[1], "phys_state": phys[1], "rate": rate_text,
                          "rate_gbps": parse_ib_rate_gbps(rate_text, rate_path) if rate_text else None,
                          "link_layer": _stripped(os.path.join(port_dir, "link_layer"))})
    if not ports:
        raise ProbeAbsent("no RDMA port under %s" % base)
    return ports


_SIOCGIFADDR = 0x8915  # ioctl: an interface's IPv4 address


def _ipv6_interfaces(text: str) -> dict[str, str]:
    """/proc/net/if_inet6 rows ("<32 hex digits> idx plen scope flags name") -> {address in hex: interface}."""
    found = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 6:
            found[fields[0].lower()] = fields[5]
    return found


def interface_of_address(address: str) -> Optional[str]:
    """The name of the local interface that holds ``address`` (a name is resolved first); None when no interface
    does, or the host cannot tell (no ioctl, no /proc). gloo and NCCL are pointed at it (GLOO_SOCKET_IFNAME)."""
    try:
        infos = socket.getaddrinfo(address, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return None
    for family, _type, _proto, _name, sockaddr in infos:
        if family == socket.AF_INET6:
            wanted = socket.inet_pton(socket.AF_INET6, str(sockaddr[0]).split("%", 1)[0]).hex()
            return _ipv6_interfaces(read_text_if_exists("/proc/net/if_inet6") or "").get(wanted)
        if family == socket.AF_INET:
            return _ipv4_interface(str(sockaddr[0]))
    return None


def _ipv4_interface(ip: str) -> Optional[str]:
    try:
        import fcntl  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    wanted = socket.inet_aton(ip)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _index, name in socket.if_nameindex():
            try:
                answer = fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address on it
            if answer[20:24] == wanted:
                return name
    return None

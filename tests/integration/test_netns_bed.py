"""The network-namespace bed of real SSH hosts (tests/support/netns.py) does what the tests built on it rely on.

Hosts are reached by Ansible over SSH, each from its own namespace; link_down really cuts one host; shape really
limits its rate (measured with iperf3); close() leaves no namespace, link or process behind, also when the test
fails, and a bed whose owner was killed is torn down by the next one.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from ansible_collections.continuum.hydra.tests.support import netns
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

pytestmark = pytest.mark.integration

VENV_BIN = os.path.dirname(sys.executable)
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"),
           ANSIBLE_NOCOLOR="1")


def _ansible(inventory, *args, timeout=120):
    return subprocess.run([os.path.join(VENV_BIN, "ansible"), "-i", str(inventory), "all", *args], env=ENV, capture_output=True,
                          text=True, timeout=timeout, check=False)


def _results(stdout):
    """host -> (status word, output) of `ansible` ad-hoc output lines like `node1 | CHANGED | rc=0 >>`."""
    found, current = {}, None
    for line in stdout.splitlines():
        if " | " in line:
            host, status = line.split(" | ")[:2]
            current = host.strip()
            found[current] = [status.strip(), ""]
        elif current:
            found[current][1] += line + "\n"
    return found


def _reachable(address, timeout=2.0):
    try:
        with socket.create_connection((address, 22), timeout=timeout) as sock:
            return sock.recv(4) == b"SSH-"
    except OSError:
        return False


def _mbit_per_s(bed, sender, receiver):
    """iperf3 from sender to receiver for 1 s: the received rate in Mbit/s."""
    server = bed.popen(receiver, ["iperf3", "-s", "-1", "-B", receiver.address], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _attempt in range(50):  # until the server listens
            proc = bed.run(sender, ["iperf3", "-c", receiver.address, "-t", "1", "-J"], timeout=30)
            try:
                return json.loads(proc.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6
            except (ValueError, KeyError):
                time.sleep(0.1)  # "Connection refused" (not listening yet) or no result: once more
        raise AssertionError("iperf3 never connected: %s" % proc.stdout[-500:])
    finally:
        server.kill()
        server.wait(timeout=10)


def test_sixteen_hosts_answer_ansible_over_ssh_each_from_its_own_namespace(netns_bed, tmp_path):
    bed = netns_bed(16)
    inventory = bed.inventory(tmp_path / "inventory.yml")
    proc = _ansible(inventory, "-m", "ansible.builtin.command", "-a", "ip -4 -o addr show dev %s" % netns.IFACE)
    results = _results(proc.stdout)
    assert sorted(results) == sorted(h.name for h in bed.hosts), proc.stdout[-2000:] + proc.stderr[-2000:]
    for host in bed.hosts:
        status, output = results[host.name]
        # Its own address on its own interface: the command ran in the host's namespace, reached over SSH.
        assert status == "CHANGED" and " inet %s/24 " % host.address in output, (host.name, status, output)
    assert len({h.address for h in bed.hosts}) == len({h.netns for h in bed.hosts}) == len({h.state_dir for h in bed.hosts}) == 16


def test_link_down_cuts_exactly_that_host_and_link_up_brings_it_back(netns_bed):
    bed = netns_bed(3)
    one, two, three = bed.hosts
    assert all(_reachable(h.address) for h in bed.hosts)
    bed.link_down(two)
    assert not _reachable(two.address)
    assert _reachable(one.address) and _reachable(three.address)
    # From another host too, not just from this machine.
    probe = "import socket; socket.create_connection((%r, 22), timeout=2)" % two.address
    assert bed.run(one, [sys.executable, "-c", probe]).returncode != 0
    bed.link_up(two)
    assert _reachable(two.address)
    assert bed.run(one, [sys.executable, "-c", probe]).returncode == 0


def test_shape_limits_the_rate_both_ways_and_unshape_lifts_it(netns_bed):
    bed = netns_bed(2)
    one, two = bed.hosts
    free = _mbit_per_s(bed, one, two)
    bed.shape(two, 40)
    into, out_of = _mbit_per_s(bed, one, two), _mbit_per_s(bed, two, one)
    bed.unshape(two)
    lifted = _mbit_per_s(bed, one, two)
    assert 20 < into <= 44 and 20 < out_of <= 44, (into, out_of)
    assert free > 10 * into and lifted > 10 * into, (free, lifted, into)


def test_close_leaves_nothing_behind_even_when_the_test_fails(tmp_path):
    reason = netns.unavailable_reason()
    if reason:
        pytest.skip("network-namespace bed: %s" % reason)
    with pytest.raises(RuntimeError, match="the test failed"), netns.Bed(2, tmp_path / "bed") as bed:
        inventory = bed.inventory(tmp_path / "inventory.yml")
        assert "SUCCESS" in _ansible(inventory, "-m", "ansible.builtin.ping").stdout
        # Ansible left its SSH control masters running (ControlPersist): they belong to the bed too.
        assert [p for p in bed.leftovers() if p.startswith("ssh master")]
        raise RuntimeError("the test failed")
    assert bed.leftovers() == []
    names = [bed.bridge] + [h.veth for h in bed.hosts] + [h.netns for h in bed.hosts]
    listing = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=30, check=False).stdout + subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, timeout=30, check=False).stdout
    assert not [n for n in names if n in listing]
    assert not os.path.exists(bed.control_path_dir) and not (netns.CLAIMS / ("%s.json" % bed.id)).exists()


def _bed_in_a_process(tmp_path, how):
    """A bed made by another Python process, which then gets signal ``how``; the names the bed made."""
    owner = subprocess.Popen([sys.executable, "-c", (
        "import json, sys, time\n"
        "from pathlib import Path\n"
        "from ansible_collections.continuum.hydra.tests.support import netns\n"
        "bed = netns.Bed(2, Path(sys.argv[1]))\n"
        "print(json.dumps({'id': bed.id, 'names': [bed.bridge] + [h.netns for h in bed.hosts]}), flush=True)\n"
        "time.sleep(600)\n"), str(tmp_path / "bed")], stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "collections")))
    try:
        made = json.loads(owner.stdout.readline())
        spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30, check=False).stdout
        assert all(n in spaces for n in made["names"][1:])
    finally:
        owner.send_signal(how)
        owner.wait(timeout=60)
    return made


def test_a_bed_closes_when_its_process_is_terminated(tmp_path):
    reason = netns.unavailable_reason()
    if reason:
        pytest.skip("network-namespace bed: %s" % reason)
    made = _bed_in_a_process(tmp_path, signal.SIGTERM)  # a CI job's timeout, a `kill`: no atexit runs
    spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30, check=False).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=30, check=False).stdout
    assert not [n for n in made["names"] if n in spaces or n in links]
    assert not (netns.CLAIMS / ("%s.json" % made["id"])).exists()


def test_a_bed_whose_owner_was_killed_is_torn_down_by_the_next(tmp_path):
    reason = netns.unavailable_reason()
    if reason:
        pytest.skip("network-namespace bed: %s" % reason)
    made = _bed_in_a_process(tmp_path, signal.SIGKILL)  # no handler, no atexit, no finally: what a killed run leaves
    spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30, check=False).stdout
    assert all(n in spaces for n in made["names"][1:])
    netns.reap()
    spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30, check=False).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=30, check=False).stdout
    assert not [n for n in made["names"] if n in spaces or n in links]
    assert not (netns.CLAIMS / ("%s.json" % made["id"])).exists()


def test_two_beds_at_once_have_their_own_names_and_subnets(netns_bed):
    first, second = netns_bed(2), netns_bed(2)
    assert first.subnet != second.subnet and not first.subnet.overlaps(second.subnet)
    assert not {first.bridge, *[h.veth for h in first.hosts]} & {second.bridge, *[h.veth for h in second.hosts]}
    assert all(len(name) <= 15 for bed in (first, second) for name in [bed.bridge] + [h.veth for h in bed.hosts])
    assert all(_reachable(h.address) for h in first.hosts + second.hosts)

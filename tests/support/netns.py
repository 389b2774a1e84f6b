"""Real hosts on one machine: network namespaces on a private bridge, each with its own sshd, reached over SSH.

A ``Bed`` is N hosts (node1..nodeN). Each is a network namespace joined to one Linux bridge by a veth pair, with an
address on a private /24 that no interface or route of this machine uses, and its own sshd (throw-away host key,
authorized key under a temp dir) that Ansible reaches over real SSH as root. All namespaces share one filesystem:
each host gets its own state dir. Faults are real: ``link_down`` takes a host's interface down (packets vanish, as
when a node crashes or loses its link), ``shape`` limits its rate with tc tbf on both ends of its veth (this
kernel has no netem: no delay or loss injection).

Nothing is left behind: ``close()`` (also on leaving the ``with`` block, at interpreter exit, and when the
constructor fails half way, and on SIGTERM) kills every process in the bed's namespaces and the bed's SSH control masters, then
deletes the veths, the bridge and the namespaces, and checks that they are gone. A test process killed outright
cannot clean up: each live bed has a claim file under CLAIMS naming what it made and its owner, and the next bed
made on the machine tears down the beds whose owner is gone.

Several beds at once (``pytest -n 2``): names carry a random bed id (interface names stay within 15 characters) and
each bed claims its own subnet, both under one lock.

Needs root, iproute2 with ``ip netns``, and sshd (tests/utils/system-deps.sh installs openssh-server); the
``netns_bed`` fixture (tests/conftest.py) skips with the reason where the machine cannot, and fails in CI.
"""

import atexit
import contextlib
import fcntl
import ipaddress
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml

CLAIMS = Path("/run/hydra-netns-beds")
SSHD = "/usr/sbin/sshd"
IFACE = "eth0"  # a host's interface inside its namespace
MAX_HOSTS = 200  # addresses .10 to .209 of the bed's /24
# Subnets a bed may take: 10.200.0.0/24 .. 10.254.255.0/24, minus any this machine already uses.
_SUBNET_SECOND_OCTETS = range(200, 255)
_COMMAND_TIMEOUT = 30  # seconds for one ip/tc/ssh-keygen call
_SSHD_START_TIMEOUT = 20  # seconds for every sshd of a bed to accept connections


class BedUnavailable(RuntimeError):
    """This machine cannot make a bed (not root, no ip netns, no sshd): one line saying why."""


@dataclass
class BedHost:
    name: str  # the inventory name (node1, ...)
    address: str  # its address on the bed's subnet
    netns: str  # its network namespace
    veth: str  # the root-namespace end of its veth pair (on the bridge); IFACE is the other end, in netns
    state_dir: Path  # its own state dir (hydra_state_dir): the namespaces share one filesystem
    sshd_log: Path


def unavailable_reason() -> Optional[str]:
    """Why this machine cannot make a bed, or None when it can."""
    if os.geteuid() != 0:
        return "needs root for network namespaces (ip netns)"
    if not shutil.which("ip"):
        return "needs iproute2 (ip)"
    if not os.path.exists(SSHD):
        return "needs %s (openssh-server; tests/utils/system-deps.sh installs it)" % SSHD
    probe = "hyprobe-%d" % os.getpid()
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=_COMMAND_TIMEOUT, check=False)
    if made.returncode != 0:
        return "ip netns add fails here: %s" % (made.stderr.strip() or "rc %d" % made.returncode)
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=_COMMAND_TIMEOUT, check=False)
    return None


def _ip(args: list[str], netns: Optional[str] = None, check: bool = True) -> subprocess.CompletedProcess:
    argv = ["ip"] + (["-n", netns] if netns else []) + args
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=_COMMAND_TIMEOUT, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv), proc.stderr.strip() or "rc %d" % proc.returncode))
    return proc


def _ip_batch(lines: list[str], netns: Optional[str] = None, force: bool = False) -> subprocess.CompletedProcess:
    """Many ip commands in one process (a bed of 16 hosts is ~100 of them)."""
    argv = ["ip"] + (["-n", netns] if netns else []) + (["-force"] if force else []) + ["-batch", "-"]
    proc = subprocess.run(argv, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=_COMMAND_TIMEOUT, check=False)
    if not force and proc.returncode != 0:
        raise RuntimeError("ip -batch: %s" % (proc.stderr.strip() or "rc %d" % proc.returncode))
    return proc


def _start_time(pid: int) -> Optional[str]:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22); None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _used_networks() -> list[Any]:
    """Every IPv4 network this machine has an address or a route in."""
    found = []
    for argv in (["-4", "-o", "addr", "show"], ["-4", "route", "show", "table", "all"]):
        for line in _ip(argv).stdout.splitlines():
            for word in line.split():
                if word[0].isdigit() and ("/" in word or word.count(".") == 3):
                    with contextlib.suppress(ValueError):
                        found.append(ipaddress.ip_network(word, strict=False))
    return found


def _existing_links() -> set[str]:
    return {line.split(":")[1].strip().split("@")[0] for line in _ip(["-o", "link", "show"]).stdout.splitlines() if ":" in line}


def _existing_netns() -> set[str]:
    return {line.split()[0] for line in _ip(["netns", "list"]).stdout.splitlines() if line.strip()}


def _netns_pids(netns: str) -> list[int]:
    proc = _ip(["netns", "pids", netns], check=False)
    return [int(word) for word in proc.stdout.split() if word.isdigit()]


def _pids_mentioning(text: str) -> list[int]:
    """Processes whose command line holds ``text`` (a bed's own temp path: nothing else can hold it)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                if text.encode() in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _teardown(claim: dict[str, Any]) -> list[str]:
    """Remove what a claim names: processes, SSH masters, veths, bridge, namespaces. Returns what is still there."""
    cp_dir = claim.get("cp_dir")
    if cp_dir and os.path.isdir(cp_dir):
        for sock in os.listdir(cp_dir):
            # The master exits at once: the request goes over its local socket, not the (maybe dead) link.
            subprocess.run(["ssh", "-o", "ControlPath=%s" % os.path.join(cp_dir, sock), "-O", "exit", "bed"],
                           capture_output=True, timeout=_COMMAND_TIMEOUT, check=False)
        for _attempt in range(50):  # an ssh dying right now may still be writing its socket there
            _kill(_pids_mentioning(cp_dir))
            shutil.rmtree(cp_dir, ignore_errors=True)
            if not os.path.exists(cp_dir):
                break
            time.sleep(0.1)
    namespaces = claim.get("namespaces", [])
    for netns in namespaces:
        _kill(_netns_pids(netns))
    links = _existing_links()
    lines = ["link del %s" % name for name in claim.get("veths", []) + [claim.get("bridge", "")] if name in links]
    lines += ["netns del %s" % netns for netns in namespaces if netns in _existing_netns()]
    if lines:
        _ip_batch(lines, force=True)
    deadline = time.monotonic() + 10
    while True:
        # A namespace's processes may take a moment to die, and the kernel frees a deleted namespace's links later.
        links, spaces = _existing_links(), _existing_netns()
        left = [n for n in claim.get("veths", []) + [claim.get("bridge", "")] if n in links] + [n for n in namespaces if n in spaces]
        left += [cp_dir] if cp_dir and os.path.exists(cp_dir) else []
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


@contextlib.contextmanager
def _claims_locked():
    CLAIMS.mkdir(parents=True, exist_ok=True)
    with open(CLAIMS / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _live_claims() -> list[dict[str, Any]]:
    """The claims of beds whose owner still runs; tears down (and forgets) the others. Call under the lock."""
    live = []
    for path in sorted(CLAIMS.glob("*.json")):
        try:
            claim = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        if _start_time(claim.get("pid", -1)) == claim.get("pid_start"):
            live.append(claim)
            continue
        _teardown(claim)
        path.unlink(missing_ok=True)
    return live


_OPEN_BEDS: "weakref.WeakSet[Bed]" = weakref.WeakSet()


def _close_on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM (a CI job's timeout, `kill`): close the open beds, then die of the signal as before."""
    for bed in list(_OPEN_BEDS):
        with contextlib.suppress(Exception):
            bed.close()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _watch_sigterm() -> None:
    """Close beds on SIGTERM too (atexit does not run then); only where nobody else handles it."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _close_on_sigterm)


def reap() -> None:
    """Tear down the beds whose owning process is gone (killed before it could close them)."""
    with _claims_locked():
        _live_claims()


class Bed:
    """N real SSH hosts in network namespaces on one bridge (see the module docstring). A context manager."""

    def __init__(self, hosts: int, tmp_path: Path, prefix: str = "node", python: Optional[str] = None) -> None:
        if not 1 <= hosts <= MAX_HOSTS:
            raise ValueError("hosts: %r is not a number of hosts from 1 to %d" % (hosts, MAX_HOSTS))
        reason = unavailable_reason()
        if reason:
            raise BedUnavailable(reason)
        self.dir = Path(tmp_path)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.python = python or ("/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable)
        self.hosts: list[BedHost] = []
        self._closed = False
        self._claim: dict[str, Any] = {}
        self._claim_path: Optional[Path] = None
        self._sshd: list[subprocess.Popen] = []
        # Ansible's control sockets are <dir>/<40 hex chars>: a pytest tmp_path can be too long for a socket path.
        self.control_path_dir = tempfile.mkdtemp(prefix="hycp")
        atexit.register(_close_at_exit, weakref.ref(self))
        _OPEN_BEDS.add(self)
        _watch_sigterm()
        try:
            self._allocate(hosts, prefix)
            self._build()
            self._start_sshds()
        except BaseException:
            self.close()
            raise

    # -- making it ------------------------------------------------------------------------------------------

    def _allocate(self, count: int, prefix: str) -> None:
        with _claims_locked():
            live = _live_claims()
            taken_ids = {c["id"] for c in live}
            taken_nets = [ipaddress.ip_network(c["subnet"]) for c in live] + _used_networks()
            links = _existing_links()
            while True:
                bed_id = "%04x" % random.randrange(0x10000)
                if bed_id not in taken_ids and "hyb" + bed_id not in links:
                    break
            for _attempt in range(1000):
                subnet = ipaddress.ip_network("10.%d.%d.0/24" % (random.choice(_SUBNET_SECOND_OCTETS), random.randrange(256)))
                if not any(subnet.overlaps(net) for net in taken_nets if not net.is_loopback and net.prefixlen > 0):
                    break
            else:
                raise RuntimeError("no free private /24 under 10.200.0.0/13 on this machine")
            self.id = bed_id
            self.subnet = subnet
            self.bridge = "hyb" + bed_id
            self.controller_address = str(subnet.network_address + 1)  # the bridge's: where the hosts reach this machine
            for index in range(1, count + 1):
                name = "%s%d" % (prefix, index)
                state = self.dir / name / "state"
                state.mkdir(parents=True, exist_ok=True)
                self.hosts.append(BedHost(name=name, address=str(subnet.network_address + 9 + index),
                                          netns="hydra-%s-%s" % (bed_id, name), veth="hy%sh%d" % (bed_id, index),
                                          state_dir=state, sshd_log=self.dir / name / "sshd.log"))
            self._claim = {"id": bed_id, "pid": os.getpid(), "pid_start": _start_time(os.getpid()), "subnet": str(subnet),
                           "bridge": self.bridge, "veths": [h.veth for h in self.hosts], "namespaces": [h.netns for h in self.hosts],
                           "cp_dir": self.control_path_dir}
            self._claim_path = CLAIMS / ("%s.json" % bed_id)
            self._claim_path.write_text(json.dumps(self._claim))

    def _build(self) -> None:
        lines = ["link add %s type bridge" % self.bridge, "addr add %s/%d dev %s" % (self.controller_address, self.subnet.prefixlen, self.bridge),
                 "link set %s up" % self.bridge]
        for host in self.hosts:
            lines += ["netns add %s" % host.netns, "link add %s type veth peer name %s netns %s" % (host.veth, IFACE, host.netns),
                      "link set %s master %s up" % (host.veth, self.bridge)]
        _ip_batch(lines)
        for host in self.hosts:
            _ip_batch(["addr add %s/%d dev %s" % (host.address, self.subnet.prefixlen, IFACE), "link set %s up" % IFACE,
                       "link set lo up"], netns=host.netns)

    def _start_sshds(self) -> None:
        keys = self.dir / "keys"
        keys.mkdir(exist_ok=True)
        self.key = keys / "id_ed25519"
        host_key = keys / "host_ed25519"
        for path in (self.key, host_key):
            if not path.exists():
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True,
                               capture_output=True, timeout=_COMMAND_TIMEOUT)
        authorized = keys / "authorized_keys"
        authorized.write_text(self.key.with_suffix(".pub").read_text())
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        for host in self.hosts:
            conf = self.dir / host.name / "sshd_config"
            conf.write_text("\n".join([
                "ListenAddress %s" % host.address,
                "HostKey %s" % host_key,
                "AuthorizedKeysFile %s" % authorized,
                "PidFile %s" % (self.dir / host.name / "sshd.pid"),
                "StrictModes no",  # the keys live under a temp dir
                "UsePAM no",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                # Ansible connects to many hosts at once and multiplexes: no refused connection, no refused session.
                "MaxStartups 200",
                "MaxSessions 64",
                "PrintMotd no",
                "PrintLastLog no",
                "Subsystem sftp internal-sftp",
                "LogLevel ERROR",
            ]) + "\n")
            with open(host.sshd_log, "w") as log:
                # -D: sshd stays this process's child (no daemon to hunt down); -e: its log into sshd.log.
                self._sshd.append(subprocess.Popen(["ip", "netns", "exec", host.netns, SSHD, "-D", "-e", "-f", str(conf)],
                                                   stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + _SSHD_START_TIMEOUT
        waiting = list(zip(self.hosts, self._sshd))
        while waiting:
            host, proc = waiting[0]
            if proc.poll() is not None:
                raise RuntimeError("sshd of %s exited (rc %s): %s" % (host.name, proc.returncode, host.sshd_log.read_text().strip()[-500:]))
            with contextlib.suppress(OSError), socket.create_connection((host.address, 22), timeout=1):
                waiting.pop(0)
                continue
            if time.monotonic() > deadline:
                raise RuntimeError("sshd of %s does not accept connections after %ds: %s"
                                   % (host.name, _SSHD_START_TIMEOUT, host.sshd_log.read_text().strip()[-500:]))
            time.sleep(0.05)

    # -- using it -------------------------------------------------------------------------------------------

    def __enter__(self) -> "Bed":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def host(self, host: Any) -> BedHost:
        """A BedHost from itself or its name."""
        if isinstance(host, BedHost):
            return host
        for candidate in self.hosts:
            if candidate.name == host:
                return candidate
        raise KeyError("no host %r in this bed; hosts: %s" % (host, ", ".join(h.name for h in self.hosts)))

    def inventory(self, path: Path, host_vars: Optional[dict[str, dict[str, Any]]] = None,
                  group_vars: Optional[dict[str, Any]] = None) -> Path:
        """A YAML inventory of the bed's hosts (group ``all``) reached over SSH as root; written to ``path``.

        ``host_vars``: inventory name -> extra variables; ``group_vars``: extra variables of every host (both win
        over the bed's own). Each host's ``hydra_state_dir`` is its own directory.
        """
        hosts = {}
        for host in self.hosts:
            values: dict[str, Any] = {"ansible_host": host.address, "hydra_state_dir": str(host.state_dir)}
            values.update((host_vars or {}).get(host.name) or {})
            hosts[host.name] = values
        unknown = set(host_vars or {}) - set(hosts)
        if unknown:
            raise KeyError("host_vars for hosts not in this bed: %s" % ", ".join(sorted(unknown)))
        common: dict[str, Any] = {
            "ansible_connection": "ssh",
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(self.key),
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
            "ansible_control_path_dir": self.control_path_dir,
            "ansible_python_interpreter": self.python,
        }
        common.update(group_vars or {})
        path = Path(path)
        path.write_text(yaml.safe_dump({"all": {"hosts": hosts, "vars": common}}, sort_keys=True))
        return path

    def ssh_argv(self, host: Any, command: str) -> list[str]:
        """An ssh command line that runs ``command`` on the host (no control master: its own connection)."""
        return ["ssh", "-i", str(self.key), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "ControlMaster=no", "root@%s" % self.host(host).address, command]

    def run(self, host: Any, argv: list[str], timeout: float = 60, **kwargs: Any) -> subprocess.CompletedProcess:
        """Run argv in the host's namespace (``ip netns exec``), text output captured, killed after ``timeout``."""
        return subprocess.run(["ip", "netns", "exec", self.host(host).netns] + list(argv), capture_output=True, text=True,
                              timeout=timeout, check=False, **kwargs)

    def popen(self, host: Any, argv: list[str], **kwargs: Any) -> subprocess.Popen:
        """Start argv in the host's namespace (a server, say); close() kills it with everything else in the namespace."""
        return subprocess.Popen(["ip", "netns", "exec", self.host(host).netns] + list(argv), **kwargs)

    def link_down(self, host: Any) -> None:
        """Take the host off the network: its interface goes down, packets to and from it vanish (no reset)."""
        _ip(["link", "set", IFACE, "down"], netns=self.host(host).netns)

    def link_up(self, host: Any) -> None:
        _ip(["link", "set", IFACE, "up"], netns=self.host(host).netns)

    def shape(self, host: Any, rate_mbit: float) -> None:
        """Limit the host's link to ``rate_mbit`` Mbit/s each way: tc tbf on both ends of its veth."""
        if not rate_mbit > 0:
            raise ValueError("rate_mbit: %r is not a positive rate" % (rate_mbit,))
        # The bucket holds ~10 ms of traffic (at least 8 KiB): enough for any timer tick, small enough to shape.
        burst = max(8192, int(rate_mbit * 1e6 / 8 / 100))
        args = ["qdisc", "replace", "dev", "%s", "root", "tbf", "rate", "%gmbit" % rate_mbit, "burst", str(burst), "latency", "200ms"]
        target = self.host(host)
        for netns, dev in ((None, target.veth), (target.netns, IFACE)):
            self._tc([a if a != "%s" else dev for a in args], netns)

    def unshape(self, host: Any) -> None:
        target = self.host(host)
        for netns, dev in ((None, target.veth), (target.netns, IFACE)):
            self._tc(["qdisc", "del", "dev", dev, "root"], netns, check=False)

    @staticmethod
    def _tc(args: list[str], netns: Optional[str], check: bool = True) -> None:
        argv = ["tc"] + (["-n", netns] if netns else []) + args
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=_COMMAND_TIMEOUT, check=False)
        if check and proc.returncode != 0:
            raise RuntimeError("%s: %s" % (" ".join(argv), proc.stderr.strip() or "rc %d" % proc.returncode))

    def leftovers(self) -> list[str]:
        """The bed's namespaces, links and processes still on the machine (none after close())."""
        links, spaces = _existing_links(), _existing_netns()
        left = [n for n in [self.bridge] + [h.veth for h in self.hosts] if n in links]
        left += [h.netns for h in self.hosts if h.netns in spaces]
        left += ["sshd pid %d" % p.pid for p in self._sshd if p.poll() is None]
        left += ["ssh master pid %d" % pid for pid in _pids_mentioning(self.control_path_dir)]
        return left

    def close(self) -> None:
        """Remove everything the bed made; idempotent. Raises when something could not be removed."""
        if self._closed:
            return
        self._closed = True
        _OPEN_BEDS.discard(self)
        left = _teardown(self._claim or {"cp_dir": self.control_path_dir})
        for proc in self._sshd:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        if self._claim_path is not None:
            self._claim_path.unlink(missing_ok=True)
        if left:
            raise RuntimeError("bed %s: could not remove %s" % (self._claim.get("id"), ", ".join(left)))


def _close_at_exit(ref: "weakref.ref[Bed]") -> None:
    bed = ref()
    if bed is not None:
        with contextlib.suppress(Exception):
            bed.close()


def run_bounded(argv: list[str], timeout: float, **kwargs: Any) -> tuple[subprocess.CompletedProcess, bool]:
    """Run argv in its own process group, text output captured; at ``timeout`` kill the whole group (an
    ansible-playbook and its forks). Returns (the completed process, whether it was killed at the deadline)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
        return subprocess.CompletedProcess(argv, proc.returncode, out, err), False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=_COMMAND_TIMEOUT)
        return subprocess.CompletedProcess(argv, proc.returncode, out, err), True


@contextlib.contextmanager
def beds(tmp_path: Path):
    """A factory of beds for one test: ``make(hosts, **options)``; every bed made is closed when the block ends.

    Where the machine cannot make a bed the test is skipped with the reason, except in CI (CI=true), where a
    skipped real-host test would let a broken setup pass: there it fails.
    """
    import pytest  # only the tests use this

    made: list[Bed] = []

    def make(hosts: int, **options: Any) -> Bed:
        try:
            bed = Bed(hosts, Path(tmp_path) / ("bed%d" % len(made)), **options)
        except BedUnavailable as exc:
            if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                pytest.fail("CI: cannot make a network-namespace bed: %s" % exc)
            pytest.skip("network-namespace bed: %s" % exc)
        made.append(bed)
        return bed

    try:
        yield make
    finally:
        problems = []
        for bed in made:
            try:
                bed.close()
            except RuntimeError as exc:
                problems.append(str(exc))
        if problems:
            raise RuntimeError("; ".join(problems))

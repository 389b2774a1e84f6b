"""A real throw-away SLURM cluster for the tests (tests/utils/slurm_cluster.sh) and reading its node states.

Shared by the slurm_gate and slurm_healthcheck integration tests: slurmctld, N slurmd and a private munged in a
temp dir on free ports, stopped in teardown. Every state the tests assert is read with `scontrol show node -o`.
"""

import contextlib
import os
import random
import re
import shutil
import socket
import subprocess
import time

import pytest

from ansible_collections.continuum.hydra.tests.support.helpers import REPO

CLUSTER_SH = os.path.join(REPO, "tests", "utils", "slurm_cluster.sh")


def slurm_installed():
    return all(shutil.which(tool) or os.path.exists("/usr/sbin/" + tool) for tool in ("slurmctld", "slurmd", "munged"))


def free_port_block(count):
    """A base port with `count` free ports after it (ports are checked by binding them)."""
    for _attempt in range(50):
        base = random.randint(20000, 40000)
        socks = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                sock.bind(("127.0.0.1", port))
                socks.append(sock)
            return base
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError("no block of %d free ports found" % count)


def require_slurm():
    """Skip the test when slurmctld/slurmd/munged are missing and tests/utils/system-deps.sh cannot install them."""
    if not slurm_installed():
        deps = subprocess.run([os.path.join(REPO, "tests", "utils", "system-deps.sh")], capture_output=True, text=True,
                              timeout=600, check=False)
        if not slurm_installed():
            pytest.skip("slurmctld/slurmd/munged not installed and tests/utils/system-deps.sh could not install them: %s"
                        % (deps.stderr.strip().splitlines() or ["no output"])[-1])


@contextlib.contextmanager
def running_cluster(directory, nodes):
    """Start a cluster of `nodes` nodes (node1..nodeN) in `directory`; yields its slurm.conf path; stops it after."""
    require_slurm()
    try:
        start = subprocess.run([CLUSTER_SH, "start", directory, str(nodes), str(free_port_block(nodes + 1))],
                               capture_output=True, text=True, timeout=60, check=False)
        assert start.returncode == 0, "cluster did not start: %s %s" % (start.stdout, start.stderr)
        yield os.path.join(directory, "slurm.conf")
    finally:
        subprocess.run([CLUSTER_SH, "stop", directory], capture_output=True, timeout=60, check=False)


def scontrol(conf, *args):
    proc = subprocess.run(["scontrol"] + list(args), env=dict(os.environ, SLURM_CONF=conf),
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, "scontrol %s: %s" % (" ".join(args), proc.stderr)
    return proc.stdout


def node_states(conf):
    """{node: (DRAIN flag set, reason without the [user@time] stamp)} straight from `scontrol show node -o`."""
    states = {}
    for line in scontrol(conf, "show", "node", "-o").splitlines():
        name = re.search(r"NodeName=(\S+)", line).group(1)
        state = re.search(r" State=(\S+)", line).group(1)
        reason = re.search(r" Reason=(.*?) \[[^\]]*\]$", line)
        states[name] = ("DRAIN" in state.split("+"), reason.group(1) if reason else None)
    return states


def set_nodes(conf, nodes, drains):
    """Every node of `nodes` in service, then the given {node: reason} drains."""
    for node in nodes:
        if node_states(conf)[node][0]:
            scontrol(conf, "update", "nodename=%s" % node, "state=resume")
    for node, reason in drains.items():
        scontrol(conf, "update", "nodename=%s" % node, "state=drain", "reason=%s" % reason)
    assert dict((n, s[0]) for n, s in node_states(conf).items()) == dict((n, n in drains) for n in nodes)


def slurm(conf, *argv):
    """A SLURM command against the cluster of ``conf``; its stdout, stripped (it must succeed)."""
    proc = subprocess.run(list(argv), env=dict(os.environ, SLURM_CONF=conf), capture_output=True, text=True, timeout=30,
                          check=False)
    assert proc.returncode == 0, "%s: %s" % (" ".join(argv), proc.stderr)
    return proc.stdout.strip()


def occupy(conf, node, seconds=600):
    """A user's job on the node (a real `sleep` under slurmd), running (not pending) when this returns; its job id."""
    job = slurm(conf, "sbatch", "--parsable", "-w", node, "-J", "user-train", "-o", "/dev/null", "--wrap", "sleep %d" % seconds)
    # More than a minute: a job the main scheduler passed over waits for its next pass (sched_interval, 60 s).
    deadline = time.monotonic() + 150
    state = ""
    while time.monotonic() < deadline:
        state = slurm(conf, "squeue", "-h", "-j", job, "-o", "%T %r")
        if state.split(" ")[0] == "RUNNING":
            return job
        time.sleep(0.5)
    raise AssertionError("job %s on %s did not start within 150 s (squeue: %s)" % (job, node, state))


def release(conf, job):
    """Cancel the job and wait until squeue no longer lists it."""
    subprocess.run(["scancel", job], env=dict(os.environ, SLURM_CONF=conf), timeout=30, check=False)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not slurm(conf, "squeue", "-h", "-j", job, "-o", "%T"):
            return
        time.sleep(0.2)

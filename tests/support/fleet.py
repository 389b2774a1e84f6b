"""Build a simulated heterogeneous fleet: local-connection hosts, each with its own fake nvidia-smi.

Every host gets a bin directory first on PATH (through the play's `environment`) holding a fake
`nvidia-smi` that replays a recorded real `nvidia-smi -q -x` file, edited where a fault is planted,
and fake `journalctl`/`dmesg` that replay a kernel log. Nothing else is faked: the module, the
connection plugin, the callback and the report files are real.
"""

import hashlib
import json
import os
import re
import subprocess
import sys

import yaml

from ansible_collections.continuum.hydra.tests.support.helpers import REPO, read_fixture

PLAYBOOK = os.path.join(REPO, "playbooks", "doctor.yml")
VENV_BIN = os.path.dirname(sys.executable)


def plant(xml, *edits):
    """Apply (pattern, replacement, count) regex edits to a copy of a real recording; each must match."""
    for pattern, replacement, count in edits:
        xml, n = re.subn(pattern, replacement, xml, count=count)
        assert n, "planting failed: %r matched nothing" % pattern
    return xml


PERSISTENCE_ON = (r"<persistence_mode>Disabled</persistence_mode>", "<persistence_mode>Enabled</persistence_mode>", 1)
# Three uncorrectable DRAM errors since the driver loaded, on the first GPU of the recording.
UNCORRECTABLE_ECC = (
    r"(<volatile>\s*<sram_correctable>0</sram_correctable>\s*<sram_uncorrectable>0</sram_uncorrectable>\s*"
    r"<dram_correctable>0</dram_correctable>\s*<dram_uncorrectable>)0(</dram_uncorrectable>)", r"\g<1>3\2", 1)

# Checks that read the real machine's /sys, NVML or kernel module rather than nvidia-smi: the fake
# nvidia-smi cannot stand in for them, so simulated fleets select the GPU checks and leave these out.
GPU_ONLY = ["gpu", "driver.nvidia_smi", "driver.version"]
# gpu.topology cross-checks `nvidia-smi topo -m` with the machine's /sys (each GPU's NUMA node and NIC).
MACHINE_BOUND = ["gpu.nvml_available", "gpu.nvml_devices", "gpu.topology"]


def host_uuid(uuid, host):
    """The UUID a recorded GPU gets on this simulated host: the recording's, with the last group the host's own."""
    return uuid.rsplit("-", 1)[0] + "-" + hashlib.sha256(("%s:%s" % (host, uuid)).encode()).hexdigest()[:12]


def host_serial(serial, host):
    """The serial a recorded GPU gets on this simulated host (same length, digits only)."""
    digits = int(hashlib.sha256(("%s:%s" % (host, serial)).encode()).hexdigest(), 16)
    return str(digits % 10 ** len(serial)).zfill(len(serial))


def own_gpus(xml, host):
    """The recording with every GPU's UUID and serial made this host's own: no two hosts of a fleet share a GPU."""
    xml = re.sub(r"<uuid>(GPU-[0-9a-fA-F-]+)</uuid>", lambda m: "<uuid>%s</uuid>" % host_uuid(m.group(1), host), xml)
    return re.sub(r"<serial>(\d+)</serial>", lambda m: "<serial>%s</serial>" % host_serial(m.group(1), host), xml)


# `nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits` while a training process
# holds a GPU (its documented CSV layout, as tests/unit/.../gpus/test_compute_apps.py reads it): a busy node.
BUSY_COMPUTE_APPS = "41234, GPU-5d2e8c4a-6a1f-2b7c-9d3e-0f1a2b3c4d5e, 30512\n"
BUSY_PROCESS = "GPU process 41234 on GPU-5d2e8c4a-6a1f-2b7c-9d3e-0f1a2b3c4d5e"  # how _host/idle.py occupants() names it


def write_host_bin(root, host, xml=None, kernel_log="", hang=False, compute_apps=""):
    """The host's fake tools (the recording's GPUs given this host's own UUIDs and serials); returns the directory.

    ``compute_apps``: what `nvidia-smi --query-compute-apps` prints (nothing: no process holds a GPU, as on an idle node).
    """
    bindir = os.path.join(root, host, "bin")
    os.makedirs(bindir, exist_ok=True)  # called again to change the host between runs
    if xml is not None or hang:
        smi_xml = os.path.join(root, host, "nvidia-smi-q-x.xml")
        with open(smi_xml, "w") as handle:
            handle.write(own_gpus(xml or "", host))
        apps = os.path.join(root, host, "compute-apps.csv")
        with open(apps, "w") as handle:
            handle.write(compute_apps)
        body = "exec sleep 600\n" if hang else (
            'case "$*" in *--query-compute-apps*) exec cat "%s" ;; *-q*) exec cat "%s" ;; esac\nexit 0\n' % (apps, smi_xml))
        _script(os.path.join(bindir, "nvidia-smi"), body)
    log = os.path.join(root, host, "kernel.log")
    with open(log, "w") as handle:
        handle.write(kernel_log)
    for tool in ("journalctl", "dmesg"):
        _script(os.path.join(bindir, tool), 'exec cat "%s"\n' % log)
    return bindir


def _script(path, body):
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)


def host_vars(bindir, **extra):
    values = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        # Only the fake tools and the basic system directories: no real nvidia-smi can leak in.
        "hydra_environment": {"PATH": "%s:/usr/bin:/bin" % bindir},
    }
    values.update(extra)
    return values


def run_playbook(inventory, report_dir, extra_vars=None, timeout=300, playbook=PLAYBOOK, limit=None):
    inv_path = os.path.join(report_dir, "inventory.yml")
    with open(inv_path, "w") as handle:
        yaml.safe_dump(inventory, handle)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"), HYDRA_REPORT_DIR=report_dir,
               ANSIBLE_NOCOLOR="1", PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", inv_path, playbook]
    for key, value in (extra_vars or {}).items():
        argv += ["-e", json.dumps({key: value})]
    if limit:
        argv += ["--limit", limit]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False)
    report_path = os.path.join(report_dir, "fleet-report.json")
    report = None
    if os.path.exists(report_path):
        with open(report_path) as handle:
            report = json.load(handle)
    return proc, report


def fixture(name):
    return read_fixture("nvidia-smi", name)

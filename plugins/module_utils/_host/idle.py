# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whether a node is idle, for anything that loads it (doctor's deep level, the screening job, workloads, fabric).

Idle means no GPU compute process and, on a SLURM node, no job holding the node. Both are read, never guessed:

- NVIDIA: ``nvidia-smi --query-compute-apps`` (gpus/compute_apps.py) lists every process with a CUDA context.
- AMD: ``/sys/class/kfd/kfd/proc/<pid>`` exists for each process that opened the KFD compute device (the kernel's
  amdkfd, "Provide compute queues information in sysfs under /sys/class/kfd/kfd/proc", amd-gfx 2020; what
  ``rocm-smi --showpids`` lists).
- SLURM: ``squeue -w <node> -t RUNNING,COMPLETING,SUSPENDED,CONFIGURING`` (slurm.py). A job's own processes
  (``SLURM_JOB_ID``: the screening job itself) do not make its node busy.

What cannot be read is said, never taken for idle: read_idle() puts it in ``unconfirmed`` (a tool that fails, a
process line nvidia-smi could not read), and a caller that finds anything there must not load the node.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import socket
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host import command, files
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import compute_apps
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import find_nvidia_smi
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLines, describe
from ansible_collections.continuum.hydra.plugins.module_utils._host.slurm import node_jobs_args, parse_node_jobs

KFD_PROC_DIR = "/sys/class/kfd/kfd/proc"
SLURM_NODE_ENV = "SLURMD_NODENAME"  # set by slurmd in a job's environment
SLURM_JOB_ENV = "SLURM_JOB_ID"
# squeue's last word on a host that belongs to no cluster: installed, but neither a slurm.conf nor a configless
# controller to fetch one from (tests/fixtures/slurm/squeue-22.05-no-configuration.stderr). Not a SLURM node.
NO_CLUSTER = "Could not establish a configuration source"

Reading = dict[str, Any]  # read_idle(): {gpu_processes, slurm, unconfirmed}
DEFAULT_TIMEOUT_S = 30.0  # each of guard()'s reads (nvidia-smi, the KFD tree, squeue), for callers without their own
FORCE_HINT = "force: true loads it anyway"
NVIDIA_APPS = "nvidia-smi --query-compute-apps"  # how the unconfirmed lines name the NVIDIA reading


def node_name(given: Optional[str], environ: Optional[Mapping[str, str]] = None) -> str:
    """The SLURM name of this node: the one given, else SLURMD_NODENAME (inside a job), else the short host name."""
    environ = os.environ if environ is None else environ
    return given or environ.get(SLURM_NODE_ENV) or socket.gethostname().split(".")[0]


def nvidia_processes(binary: str, timeout: float, bad: Optional[BadLines] = None) -> list[dict[str, Any]]:
    """Each NVIDIA compute process as {pid, gpu, used_memory_mib, source}; ProbeError when nvidia-smi cannot list them.
    A process line it could not read (its pid ``[Insufficient Permissions]``) is counted in ``bad``."""
    return [{"pid": app["pid"], "gpu": app["gpu_uuid"], "used_memory_mib": app["used_memory_mib"], "source": "nvidia-smi"}
            for app in compute_apps.read_compute_apps(binary, timeout, bad)]


def kfd_processes(timeout: float, proc_dir: str = KFD_PROC_DIR) -> list[dict[str, Any]]:
    """Each process holding the AMD KFD compute device as {pid, gpu, used_memory_mib, source}; [] without KFD."""
    if not os.path.isdir(proc_dir):
        return []
    return [{"pid": int(name), "gpu": None, "used_memory_mib": None, "source": proc_dir}
            for name in files.list_dir(proc_dir, timeout) if name.isdigit()]


def slurm_jobs(node: str, timeout: float, own_job: Optional[str] = None, squeue_path: Optional[str] = None) -> Optional[dict[str, Any]]:
    """{node, jobs, own_job}: the jobs holding ``node`` other than ``own_job``; None where SLURM's squeue is not
    installed or has no cluster to ask (not a SLURM node). ProbeError when squeue fails otherwise (slurmctld down, a
    node name it does not know)."""
    binary = command.find_binary("squeue", squeue_path)
    if not binary:
        if squeue_path:
            raise ProbeError("squeue %s is not an executable file" % squeue_path)
        return None
    rc, out, err = command.run([binary] + node_jobs_args(node), timeout)
    if rc != 0 and NO_CLUSTER in err:
        return None
    if rc != 0:
        raise ProbeError("squeue -w %s: rc %d: %s" % (node, rc, " ".join((err or out).split())[:200] or "no output"))
    jobs = [job for job in parse_node_jobs(out) if job["id"] != own_job]
    return {"node": node, "jobs": jobs, "own_job": own_job}


def read_idle(nvidia_smi: Optional[str], timeout: float, node: Optional[str] = None, own_job: Optional[str] = None,
              squeue_path: Optional[str] = None, kfd_dir: str = KFD_PROC_DIR,
              environ: Optional[Mapping[str, str]] = None) -> Reading:
    """What occupies this node: {gpu_processes, slurm (slurm_jobs() or None), unconfirmed: [what could not be read]}.

    ``nvidia_smi``: the binary to list NVIDIA processes with, None on a host without NVIDIA GPUs. ``own_job`` defaults
    to SLURM_JOB_ID (the job this runs in); this process itself never counts.
    """
    environ = os.environ if environ is None else environ
    own_job = own_job if own_job is not None else environ.get(SLURM_JOB_ENV)
    unconfirmed: list[str] = []
    processes: list[dict[str, Any]] = []
    bad = BadLines()
    readers = [("AMD KFD processes", lambda: kfd_processes(timeout, kfd_dir))]
    if nvidia_smi:
        readers.insert(0, (NVIDIA_APPS, lambda: nvidia_processes(nvidia_smi, timeout, bad)))
    for what, reader in readers:
        try:
            processes += [proc for proc in reader() if proc["pid"] != os.getpid()]
        except (ProbeError, ProbeAbsent) as exc:
            unconfirmed.append("%s: %s" % (what, exc))
    if bad:  # a process nvidia-smi lists but cannot name is not "no process"
        unconfirmed.append("%s: %s: a process it cannot read may hold a GPU" % (NVIDIA_APPS, describe(bad.as_dict(), "process line")))
    slurm = None
    name = node_name(node, environ)
    try:
        slurm = slurm_jobs(name, timeout, own_job, squeue_path)
    except (ProbeError, ProbeAbsent) as exc:
        unconfirmed.append("SLURM jobs of node %s: %s" % (name, exc))
    return {"gpu_processes": processes, "slurm": slurm, "unconfirmed": unconfirmed}


def occupants(reading: Reading) -> list[str]:
    """What keeps the node busy, one phrase each (the jobs first); [] when nothing does."""
    slurm = reading.get("slurm") or {}
    out = ["SLURM job %s (%s, user %s, %s)" % (job["id"], job["name"], job["user"], job["state"].lower())
           for job in slurm.get("jobs") or []]
    out += ["GPU process %d%s" % (proc["pid"], " on %s" % proc["gpu"] if proc.get("gpu") else "")
            for proc in reading.get("gpu_processes") or []]
    return out


def refusal(reading: Reading) -> Optional[str]:
    """Why the node must not be loaded, one line: what occupies it, else what could not be read; None when idle."""
    busy = occupants(reading)
    if busy:
        return "node busy (%s)" % "; ".join(busy)
    unconfirmed = reading.get("unconfirmed") or []
    if unconfirmed:
        return "cannot confirm the node is idle: %s" % "; ".join(str(text) for text in unconfirmed)
    return None


def guard(node: Optional[str] = None, force: bool = False, nvidia_smi_path: Optional[str] = None,
          timeout: float = DEFAULT_TIMEOUT_S, squeue_path: Optional[str] = None, kfd_dir: str = KFD_PROC_DIR,
          environ: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """The idle guard of what loads a node outside doctor (workloads, the fabric test; doctor's is its node_idle
    probe): read_idle() on this node now, and whether it may be loaded.

    {node, gpu_processes, slurm, unconfirmed, occupants, force, refused, forced}: ``refused`` is None when the node may
    be loaded, else the one line why not (refusal() and FORCE_HINT); with ``force`` it is None and ``forced`` holds what
    would have refused it (None when nothing would). ``nvidia_smi_path``: find_nvidia_smi()'s override (None: PATH; a
    host without nvidia-smi has no NVIDIA compute process). ``node``: the node's SLURM name (node_name()).
    """
    unconfirmed: list[str] = []
    binary: Optional[str] = None
    try:
        binary = find_nvidia_smi(nvidia_smi_path)
    except ProbeAbsent:
        binary = None
    except ProbeError as exc:
        unconfirmed.append("%s: %s" % (NVIDIA_APPS, exc))
    name = node_name(node, environ)
    reading = read_idle(binary, timeout, name, squeue_path=squeue_path, kfd_dir=kfd_dir, environ=environ)
    reading["unconfirmed"] = unconfirmed + reading["unconfirmed"]
    why = refusal(reading)
    return dict(reading, node=name, occupants=occupants(reading), force=bool(force),
                refused=None if force or why is None else "%s; %s" % (why, FORCE_HINT),
                forced=why if force else None)

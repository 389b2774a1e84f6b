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

What cannot be read is said, never taken for idle: read_idle() puts it in ``unconfirmed``, and a caller that finds
anything there must not load the node.

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
from ansible_collections.continuum.hydra.plugins.module_utils._host.slurm import node_jobs_args, parse_node_jobs

KFD_PROC_DIR = "/sys/class/kfd/kfd/proc"
SLURM_NODE_ENV = "SLURMD_NODENAME"  # set by slurmd in a job's environment
SLURM_JOB_ENV = "SLURM_JOB_ID"
# squeue's last word on a host that belongs to no cluster: installed, but neither a slurm.conf nor a configless
# controller to fetch one from (tests/fixtures/slurm/squeue-22.05-no-configuration.stderr). Not a SLURM node.
NO_CLUSTER = "Could not establish a configuration source"

Reading = dict[str, Any]  # read_idle(): {gpu_processes, slurm, unconfirmed}


def node_name(given: Optional[str], environ: Optional[Mapping[str, str]] = None) -> str:
    """The SLURM name of this node: the one given, else SLURMD_NODENAME (inside a job), else the short host name."""
    environ = os.environ if environ is None else environ
    return given or environ.get(SLURM_NODE_ENV) or socket.gethostname().split(".")[0]


def nvidia_processes(binary: str, timeout: float) -> list[dict[str, Any]]:
    """Each NVIDIA compute process as {pid, gpu, used_memory_mib, source}; ProbeError when nvidia-smi cannot list them."""
    return [{"pid": app["pid"], "gpu": app["gpu_uuid"], "used_memory_mib": app["used_memory_mib"], "source": "nvidia-smi"}
            for app in compute_apps.read_compute_apps(binary, timeout)]


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
    readers = [("AMD KFD processes", lambda: kfd_processes(timeout, kfd_dir))]
    if nvidia_smi:
        readers.insert(0, ("nvidia-smi --query-compute-apps", lambda: nvidia_processes(nvidia_smi, timeout)))
    for what, reader in readers:
        try:
            processes += [proc for proc in reader() if proc["pid"] != os.getpid()]
        except (ProbeError, ProbeAbsent) as exc:
            unconfirmed.append("%s: %s" % (what, exc))
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

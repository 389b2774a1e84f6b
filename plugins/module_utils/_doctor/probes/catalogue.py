# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Every probe by name, and the envelope each one's outcome is wrapped in.

A probe is ``fn(options) -> data`` (plain JSON-able data, no judgement). It
raises _command.ProbeAbsent when what it reads does not exist on the host and
_command.ProbeError when reading failed. collect() turns that into an
envelope: {"status": READ_OK|READ_ABSENT|READ_FAILED (_status.py), "data", "reason", "duration_ms"}.
Only the probes the selected checks need are run, each once.

A probe sees the envelopes of the probes run before it as ``options["envelopes"]`` (the NVLink probe does not
call a nvidia-smi that already failed). With a run deadline (doctor's ``timeouts.total``), every timeout a
probe reads from ``options["timeouts"]`` is capped by the time left when it reads it, each probe runs in a
watched thread abandoned at the deadline (plus a grace for its own kill), and no probe starts once the
deadline has passed: those envelopes are READ_FAILED with the deadline as reason and ``not_run`` set.

The idle guard: an active probe (ACTIVE_PROBES, the deep level's load on the GPUs) runs only when ``node_idle``
(probes/idle.py), read right before it, finds the node idle, or with the ``force`` option; otherwise its envelope is
READ_ABSENT with the reason (its checks SKIP, naming the job or process that keeps the node busy, or what could not be
read). The guard is read before each active probe, not once: a job SLURM starts while the DCGM diagnostic runs (up to
10 minutes) must not be loaded by the next tool for 30 more. Its envelope is the reading before the first active
probe; each later one joins its data as ``rechecks`` ({before, occupants, unread, refused}), and once one refuses, no active
probe runs after it.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Callable, NamedTuple, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import levels
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import active as active_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import amd as amd_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import dcgm as dcgm_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import gpu as gpu_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import healthcheck as healthcheck_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import host as host_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import idle as idle_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import interconnect as interconnect_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import rvs as rvs_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import stack as stack_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import system as system_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import tenant as tenant_probes
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import topology as topology_probes
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import CallTimedOut, ProbeAbsent, ProbeError, call_with_timeout
from ansible_collections.continuum.hydra.plugins.module_utils._host.idle import occupants
from ansible_collections.continuum.hydra.plugins.module_utils._status import READ_ABSENT, READ_FAILED, READ_OK

PROBES: dict[str, Callable[..., Any]] = {
    "host": host_probes.probe_host,
    "nvidia_smi": gpu_probes.probe_nvidia_smi,
    "nvml": gpu_probes.probe_nvml,
    "nvidia_pci": gpu_probes.probe_nvidia_pci,
    "kernel_module": gpu_probes.probe_kernel_module,
    "kernel_log": gpu_probes.probe_kernel_log,
    "nvlink": gpu_probes.probe_nvlink,
    "fabric_manager": gpu_probes.probe_fabric_manager,
    "amd_smi": amd_probes.probe_amd_smi,
    "amdgpu_log": amd_probes.probe_amdgpu_log,
    "torch": stack_probes.probe_torch,
    "nvcc": stack_probes.probe_nvcc,
    "dev_shm": system_probes.probe_dev_shm,
    "cgroups": system_probes.probe_cgroups,
    "edac": system_probes.probe_edac,
    "numa": system_probes.probe_numa,
    "disk_space": system_probes.probe_disk_space,
    "time_sync": system_probes.probe_time_sync,
    "infiniband": system_probes.probe_infiniband,
    "ib_counters": interconnect_probes.probe_ib_counters,
    "pcie_aer": interconnect_probes.probe_pcie_aer,
    "nvlink_errors": interconnect_probes.probe_nvlink_errors,
    "dcgm_diag": dcgm_probes.probe_dcgm_diag,
    "rvs": rvs_probes.probe_rvs,
    "topology": topology_probes.probe_topology,
    "gpu_active": active_probes.probe_gpu_active,
    "memory_active": active_probes.probe_memory_active,
    "node_idle": idle_probes.probe_node_idle,
    "healthcheck_last": healthcheck_probes.probe_healthcheck_last,
    "tenants": tenant_probes.probe_tenants,
}

# The lowest doctor level (_doctor/levels.py) that may run each probe, from what it costs the host. quick: the one
# nvidia-smi -q -x call and /proc, /sys and statvfs reads; standard: other subprocesses (journalctl, torch, nvcc,
# systemctl, timedatectl), NVML sessions, a second nvidia-smi call; deep: loads the GPUs for minutes. A probe not
# listed is standard. A check's level is the highest level of the probes it reads (checks/registry.py).
PROBE_LEVELS = {
    "host": levels.QUICK,
    "nvidia_smi": levels.QUICK,
    "amd_smi": levels.QUICK,
    "nvidia_pci": levels.QUICK,
    "kernel_module": levels.QUICK,
    "dev_shm": levels.QUICK,
    "cgroups": levels.QUICK,
    "edac": levels.QUICK,
    "numa": levels.QUICK,
    "disk_space": levels.QUICK,
    "infiniband": levels.QUICK,
    "ib_counters": levels.QUICK,
    "pcie_aer": levels.QUICK,
    "healthcheck_last": levels.QUICK,
    "nvml": levels.STANDARD,
    "kernel_log": levels.STANDARD,
    "amdgpu_log": levels.STANDARD,
    "nvlink": levels.STANDARD,
    "nvlink_errors": levels.STANDARD,
    "fabric_manager": levels.STANDARD,
    "torch": levels.STANDARD,
    "nvcc": levels.STANDARD,
    "time_sync": levels.STANDARD,
    "dcgm_diag": levels.DEEP,
    "rvs": levels.DEEP,
    "gpu_active": levels.DEEP,
    "memory_active": levels.DEEP,
    "node_idle": levels.DEEP,
}

# The idle guard and the probes it guards: every deep probe loads the node (collect() runs none on a busy node).
GUARD = "node_idle"
ACTIVE_PROBES = tuple(name for name, level in PROBE_LEVELS.items() if level == levels.DEEP and name != GUARD)


def probe_level(name: str) -> str:
    """The lowest level that may run probe ``name`` (PROBE_LEVELS; standard for a probe not listed)."""
    return PROBE_LEVELS.get(name, levels.STANDARD)


# Seconds a probe may run past the run deadline before it is abandoned: its own commands are bounded by the
# deadline, and killing a command's process tree and reaping it takes a moment.
DEADLINE_GRACE_S = 5.0
# Probes that only read /proc and /sys: a read of a dead device's files can block for good, so each of these
# probes is bounded as a whole by timeouts.command (their reads take no deadline one by one).
FILE_PROBES = frozenset({"nvidia_pci", "kernel_module", "edac", "numa", "cgroups", "infiniband"})
# The least timeout a probe is given once the deadline is near: a command still starts and times out at once.
_MIN_TIMEOUT_S = 0.001


class Deadline(NamedTuple):
    """When the run must stop (a time.monotonic() value), and the ``timeouts.total`` it comes from."""
    at: float
    total: float

    @property
    def label(self) -> str:
        return "doctor deadline (timeouts.total=%ss)" % ("%g" % self.total)

    @property
    def reason(self) -> str:
        """What a check or probe that never ran says."""
        return "not run: %s" % self.label


class BoundedTimeouts(Mapping[str, Any]):
    """A probe's view of options["timeouts"]: each value capped, when read, by the seconds left to the deadline."""

    def __init__(self, base: Mapping[str, Any], at: float) -> None:
        self._base = base
        self._at = at

    def __getitem__(self, key: str) -> Any:
        return max(_MIN_TIMEOUT_S, min(self._base[key], self._at - time.monotonic()))

    def __iter__(self) -> Iterator[str]:
        return iter(self._base)

    def __len__(self) -> int:
        return len(self._base)


def _not_run(reason: str) -> dict[str, Any]:
    return {"status": READ_FAILED, "data": None, "reason": reason, "not_run": True, "duration_ms": 0.0}


def collect(names: Iterable[str], options: Mapping[str, Any],
            probes: Optional[Mapping[str, Callable[..., Any]]] = None,
            deadline: Optional[Deadline] = None) -> dict[str, dict[str, Any]]:
    """Run each named probe once (in order) and return name -> envelope; none starts past ``deadline``. The idle
    guard (GUARD), when named with active probes, is read right before each of them instead of in its place."""
    table = probes or PROBES
    names = list(names)
    guarded = GUARD in names and any(name in ACTIVE_PROBES for name in names)
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        if name in out or (guarded and name == GUARD):
            continue
        if deadline is not None and time.monotonic() >= deadline.at:
            out[name] = _not_run(deadline.reason)
            continue
        held = _guard_before(name, out, options, table, deadline) if guarded and name in ACTIVE_PROBES else None
        if held is not None:
            out[name] = {"status": READ_ABSENT, "data": None, "reason": held, "duration_ms": 0.0}
            continue
        out[name] = _envelope(name, table, options, out, deadline)
    if guarded and GUARD not in out:  # the deadline passed before the first active probe: the guard never read
        out[GUARD] = _not_run(deadline.reason if deadline is not None else "not run")
    return out


def _envelope(name: str, table: Mapping[str, Callable[..., Any]], options: Mapping[str, Any],
              out: dict[str, dict[str, Any]], deadline: Optional[Deadline]) -> dict[str, Any]:
    """Run probe ``name`` now (it sees the envelopes so far) and wrap its outcome."""
    start = time.monotonic()
    view = dict(options, envelopes=out)
    if deadline is not None:
        view["timeouts"] = BoundedTimeouts(options.get("timeouts") or {}, deadline.at)
    try:
        envelope = {"status": READ_OK, "data": _call(table[name], view, name, deadline), "reason": None}
    except CallTimedOut as exc:
        if deadline is None or exc.what != _watch_name(name):
            envelope = {"status": READ_FAILED, "data": None, "reason": str(exc)}
        else:
            envelope = _not_run("%s; probe %s was still running" % (deadline.reason, name))
    except ProbeAbsent as exc:
        envelope = {"status": READ_ABSENT, "data": None, "reason": str(exc)}
    except ProbeError as exc:
        envelope = {"status": READ_FAILED, "data": None, "reason": str(exc)}
    except Exception as exc:  # pylint: disable=broad-exception-caught
        # An unexpected probe bug becomes ERROR on its checks, never a crash of the run.
        envelope = {"status": READ_FAILED, "data": None, "reason": "probe %s crashed: %s: %s" % (name, type(exc).__name__, exc)}
    if deadline is not None and envelope["status"] == READ_FAILED and not envelope.get("not_run") \
            and time.monotonic() >= deadline.at:
        envelope["reason"] = "%s; the %s has passed" % (envelope["reason"], deadline.label)
    envelope["duration_ms"] = round((time.monotonic() - start) * 1000.0, 3)
    return envelope


def _guard_before(name: str, out: dict[str, dict[str, Any]], options: Mapping[str, Any],
                  table: Mapping[str, Callable[..., Any]], deadline: Optional[Deadline]) -> Optional[str]:
    """Read the idle guard right before active probe ``name``: why ``name`` must not run, None when it may. The first
    reading is the guard's envelope; a later one is read only while every reading so far found the node idle (and
    not under ``force``), and joins the envelope's data as a recheck."""
    if GUARD not in out:
        out[GUARD] = _envelope(GUARD, table, options, out, deadline)
        return held_by_guard(out, options)
    held = held_by_guard(out, options)
    if held is not None or options.get("force"):
        return held
    again = _envelope(GUARD, table, options, out, deadline)
    busy = occupants(again["data"] or {}) if again["status"] == READ_OK else []
    unread = None if again["status"] == READ_OK else again["reason"]
    refused = "node busy, found before probe %s (%s)" % (name, "; ".join(busy)) if busy else \
        "before probe %s: %s" % (name, unread) if unread else None
    first = out[GUARD]["data"] = out[GUARD]["data"] or {}
    first.setdefault("rechecks", []).append({"before": name, "occupants": busy, "unread": unread, "refused": refused,
                                             "duration_ms": again["duration_ms"]})
    return held_by_guard(out, options)


def held_by_guard(envelopes: Mapping[str, Mapping[str, Any]], options: Mapping[str, Any]) -> Optional[str]:
    """Why an active probe must not run now (the guard's envelope in ``envelopes``), None when it may: every reading
    of the node (the first and its ``rechecks``) found it idle, the guard was not run (no deep level), or ``force`` is
    set."""
    guard = envelopes.get(GUARD)
    if guard is None or options.get("force"):
        return None
    if guard["status"] != READ_OK:
        return "not run: %s; force: true runs it anyway" % guard["reason"]
    busy = occupants(guard["data"] or {})
    if busy:
        return "not run: node busy (%s); force: true runs it anyway" % "; ".join(busy)
    refused = [recheck["refused"] for recheck in (guard["data"] or {}).get("rechecks") or [] if recheck.get("refused")]
    return "not run: %s; force: true runs it anyway" % refused[0] if refused else None


def _watch_name(name: str) -> str:
    return "probe %s" % name


def _call(probe: Callable[..., Any], options: Mapping[str, Any], name: str, deadline: Optional[Deadline]) -> Any:
    """probe(options); under a deadline in a watched thread, abandoned DEADLINE_GRACE_S after it (CallTimedOut).

    A FILE_PROBES probe is also bounded by timeouts.command; past that it fails on its own (ProbeError naming it).
    """
    run_left = None if deadline is None else max(0.0, deadline.at - time.monotonic()) + DEADLINE_GRACE_S
    own = (options.get("timeouts") or {}).get("command") if name in FILE_PROBES else None
    if own and (run_left is None or own < run_left):
        return call_with_timeout(lambda: probe(options), own, "probe %s (reading /proc and /sys)" % name)
    if run_left is None:
        return probe(options)
    return call_with_timeout(lambda: probe(options), run_left, _watch_name(name))

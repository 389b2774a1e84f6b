# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: task_timeout
short_description: A long task's timeout, from its module's own deadline plus a margin
version_added: 0.3.0
description:
  - The value of the task keyword C(timeout) for a long continuum.hydra task, in whole seconds. It is the most the
    module can take with the options given, computed by the module's own code from its defaults (one place), plus
    O(margin) for what lies outside the module - the SSH connection, the module's transfer and start, its answer.
  - A module that answers within its deadline is never cut; a task still running at the timeout is one whose host
    stopped answering, or whose Python hung before the module started. Ansible then fails the task with
    C(Timed out after N second(s)) and the P(continuum.hydra.fleet_report#callback) callback reports the host as
    C(task_failed) with that reason, the other hosts' results untouched.
  - V(doctor) - C(timeouts.total) as the module resolves it (default 300 s; a C(deep) run adds its tools' timeouts).
  - V(profile) - the sum of the timeouts the module gives each step (the static profile, each selected benchmark;
    the GPU benchmark once per GPU, C(expect.gpu_count) else 8).
  - V(workload) - the input is C(mode=discover)'s C(workloads); each model's C(timeout) plus the run's own slack
    per model. V(0) (no timeout) when a model has no limit (C(timeout=0)).
  - V(gpu_settings_apply), V(mig_apply), V(slurm_gate_apply) - the input is the module's per-call C(timeout); the
    most calls a run makes (a read, each change, the read-backs) for the GPUs (O(gpus), else 8) or nodes (O(nodes)).
  - V(screen) - the input is the module's C(time_limit) (minutes); its wait to start (O(start_timeout)), the job's
    time limit and the margin SLURM takes to end it, and its SLURM commands.
  - V(bug_report) - the input is the module's C(timeout); plus the fetch of the report to the controller.
  - See C(docs/hosts_die.md).
author:
  - continuum.hydra developers (@continuum-hydra)
options:
  _input:
    description:
      - V(doctor), V(profile) - the module's O(continuum.hydra.doctor#module:timeouts) dict (null for the defaults).
      - V(workload) - the C(workloads) list of a C(mode=discover) run of the same selection.
      - V(gpu_settings_apply), V(mig_apply), V(slurm_gate_apply) - the module's C(timeout) (seconds per call).
    type: raw
    required: true
  module:
    description: The module the task runs.
    type: str
    required: true
    choices: [doctor, profile, workload, gpu_settings_apply, mig_apply, slurm_gate_apply, screen, bug_report]
  margin:
    description:
      - Seconds added to the module's deadline. Null takes the default, 60 - SSH's connect timeout (10 s), the
        module's transfer and start on a loaded host and the answer's way back, with room to spare.
    type: float
  level:
    description: V(doctor) - the run's O(continuum.hydra.doctor#module:level) (null - the module's default).
    type: str
  expect:
    description: V(doctor), V(profile) - the host's C(hydra_expect) (a deep run's DCGM level, the GPU count).
    type: dict
  benchmarks:
    description: V(profile) - the module's O(continuum.hydra.profile#module:benchmarks).
    type: list
    elements: str
  benchmark_options:
    description: V(profile) - the module's O(continuum.hydra.profile#module:benchmark_options).
    type: dict
  warmup_s:
    description: V(profile) - the module's O(continuum.hydra.profile#module:warmup_s).
    type: float
  duration_s:
    description: V(profile) - the module's O(continuum.hydra.profile#module:duration_s).
    type: float
  gpus:
    description: V(gpu_settings_apply), V(mig_apply) - the GPUs named (an empty list - all, counted as 8).
    type: list
    elements: raw
  nodes:
    description: V(slurm_gate_apply) - the nodes gated (a list, or their number).
    type: raw
  start_timeout:
    description: V(screen) - the module's O(continuum.hydra.screen#module:start_timeout) (null - its default).
    type: float
seealso:
  - module: continuum.hydra.doctor
  - module: continuum.hydra.profile
  - module: continuum.hydra.workload
"""

EXAMPLES = r"""
- name: Check host health and configuration
  continuum.hydra.doctor:
    timeouts: "{{ hydra_timeouts | default({}) }}"
    level: "{{ hydra_level | default('standard') }}"
  timeout: "{{ hydra_timeouts | default({}) | continuum.hydra.task_timeout('doctor', level=hydra_level | default(none)) }}"

- name: Set the GPU settings
  continuum.hydra.gpu_settings_apply:
    persistence_mode: true
    timeout: 60
  timeout: "{{ 60 | continuum.hydra.task_timeout('gpu_settings_apply', gpus=[]) }}"
"""

RETURN = r"""
_value:
  description: Seconds for the task keyword C(timeout); V(0) means no timeout (a workload without a limit).
  type: int
  sample: 360
"""

import math
from collections.abc import Callable, Mapping
from typing import Any, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor_run
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import screen
from ansible_collections.continuum.hydra.plugins.module_utils._profile import run as profile_run
from ansible_collections.continuum.hydra.plugins.module_utils._remediate import bug_report, gpu_settings, mig, slurm
from ansible_collections.continuum.hydra.plugins.module_utils._workload import run as workload_run

# What lies outside a module's own deadline: the SSH connection (its connect timeout, 10 s by default), sending the
# module and starting its Python on a loaded host, and the answer's way back.
DEFAULT_MARGIN_S = 60.0


def _seconds(value: Any, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or number < 0:
        raise AnsibleFilterError("task_timeout: %s %r is not a number of seconds (0 or more)" % (what, value))
    return number


def _mapping(value: Any, what: str) -> Optional[Mapping[str, Any]]:
    if value is None or isinstance(value, Mapping):
        return value
    raise AnsibleFilterError("task_timeout: %s must be a dict, got %r" % (what, value))


def _given(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options set (null leaves the module's default)."""
    return dict((key, value) for key, value in options.items() if value is not None)


def _doctor(value: Any, options: Mapping[str, Any]) -> Optional[float]:
    return doctor_run.deadline_s(_mapping(value, "timeouts"), _mapping(options.get("expect"), "expect"), options.get("level"))


def _profile(value: Any, options: Mapping[str, Any]) -> Optional[float]:
    return profile_run.deadline_s(timeouts=_mapping(value, "timeouts"), **_given(options))


def _workload(value: Any, options: Mapping[str, Any]) -> Optional[float]:
    if not isinstance(value, list) or not all(isinstance(model, Mapping) and "timeout" in model for model in value):
        raise AnsibleFilterError("task_timeout: workload needs the 'workloads' list of a mode=discover run, got %r" % (value,))
    return workload_run.deadline_s([None if m["timeout"] is None else _seconds(m["timeout"], "a model's timeout") for m in value])


def _gpus(options: Mapping[str, Any]) -> int:
    named = options.get("gpus")
    if named is not None and not isinstance(named, list):
        raise AnsibleFilterError("task_timeout: gpus must be a list of GPUs (empty: all), got %r" % (named,))
    return _expect.gpus_for_deadline(named=named)


def _gpu_settings(value: Any, options: Mapping[str, Any]) -> Optional[float]:
    return gpu_settings.deadline_s(_seconds(value, "timeout"), _gpus(options))


def _mig(value: Any, options: Mapping[str, Any]) -> Optional[float]:
    return mig.deadline_s(_seconds(value, "timeout"), _gpus(options), _expect.GPUS_WHEN_UNKNOWN)


def _slurm_gate(value: Any, options: Mapping[str, Any]) -> Optional[float]:
    nodes = options.get("nodes")
    count = len(nodes) if isinstance(nodes, list) else nodes
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise AnsibleFilterError("task_timeout: nodes must be the list of nodes gated, or their number, got %r" % (nodes,))
    return slurm.deadline_s(_seconds(value, "timeout"), count)


def _screen(value: Any, options: Mapping[str, Any]) -> Optional[float]:
    wait = options.get("start_timeout")
    limit = screen.DEFAULT_TIME_LIMIT_MIN if value is None else int(value) if isinstance(value, str) and value.isdigit() else value
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise AnsibleFilterError("task_timeout: screen needs the module's time_limit (whole minutes), got %r" % (value,))
    return screen.deadline_s(limit, screen.DEFAULT_START_TIMEOUT_S if wait is None else _seconds(wait, "start_timeout"))


def _bug_report(value: Any, options: Mapping[str, Any]) -> Optional[float]:
    return bug_report.deadline_s(_seconds(bug_report.DEFAULT_TIMEOUT_S if value is None else value, "timeout"))


# The module's own deadline, by module: each computed by the module's code.
DEADLINES: dict[str, Callable[[Any, Mapping[str, Any]], Optional[float]]] = {
    "doctor": _doctor, "profile": _profile, "workload": _workload,
    "gpu_settings_apply": _gpu_settings, "mig_apply": _mig, "slurm_gate_apply": _slurm_gate, "screen": _screen,
    "bug_report": _bug_report,
}


def task_timeout(value: Any, module: str, margin: Any = None, **options: Any) -> int:
    compute = DEADLINES.get(module)
    if compute is None:
        raise AnsibleFilterError("task_timeout: module %r is not one of %s" % (module, ", ".join(DEADLINES)))
    extra = _seconds(DEFAULT_MARGIN_S if margin is None else margin, "margin")
    try:
        deadline = compute(value, options)
    except (ValueError, TypeError) as exc:  # the module's own one-line refusal of a bad option
        raise AnsibleFilterError("task_timeout: %s: %s" % (module, exc)) from None
    return 0 if deadline is None else int(math.ceil(deadline + extra))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"task_timeout": task_timeout}

"""The task_timeout filter: a long task's timeout is its module's own deadline, computed by the module's code, plus
a margin; and every long task of the playbooks and roles uses it (docs/hosts_die.md)."""

import glob
import math
import os
import re

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.continuum.hydra.plugins.filter.task_timeout import DEADLINES, DEFAULT_MARGIN_S, task_timeout
from ansible_collections.continuum.hydra.plugins.module_utils import _expect
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor_run
from ansible_collections.continuum.hydra.plugins.module_utils._profile import run as profile_run
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import cpu as cpu_bench
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import gpu as gpu_bench
from ansible_collections.continuum.hydra.plugins.module_utils._remediate.slurm import SlurmGateWorker
from ansible_collections.continuum.hydra.plugins.module_utils._workload import run as workload_run
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

MARGIN = int(DEFAULT_MARGIN_S)


@pytest.mark.parametrize("level", ["quick", "standard", "deep"])
def test_doctor_is_its_resolved_total_plus_the_margin(level):
    total = doctor_run.resolved_timeouts({}, {}, level)["total"]
    assert task_timeout({}, "doctor", level=level) == total + MARGIN
    assert task_timeout(None, "doctor", level=level, margin=5) == total + 5


def test_doctor_defaults_are_the_modules_own():
    assert task_timeout(None, "doctor") == doctor_run.DEFAULT_TOTAL_TIMEOUT + MARGIN
    # deep: the active tools' timeouts on top, and DCGM's follows its diag level (from hydra_expect)
    deep = task_timeout({}, "doctor", level="deep")
    assert deep == doctor_run.DEFAULT_TOTAL_TIMEOUT + sum(doctor_run.DEFAULT_TIMEOUTS[n] for n in doctor_run.DEEP_TIMEOUTS) + MARGIN
    assert task_timeout({}, "doctor", level="deep", expect={"dcgm_diag_level": 3}) > deep
    assert task_timeout({"total": 42}, "doctor", level="deep") == 42 + MARGIN


def test_a_bad_doctor_option_is_the_modules_own_one_line_refusal():
    with pytest.raises(AnsibleFilterError, match=r"^task_timeout: doctor: timeouts.total: -1 is not a positive number"):
        task_timeout({"total": -1}, "doctor")
    with pytest.raises(AnsibleFilterError, match=r"level: 'fast' is not a level; accepted: quick, standard, deep"):
        task_timeout({}, "doctor", level="fast")


def test_profile_sums_the_timeouts_of_its_steps():
    cpu_only = task_timeout({}, "profile", benchmarks=["cpu"], warmup_s=1, duration_s=2, margin=0)
    static = profile_run.DEFAULT_TIMEOUTS["torch"] + 2 * profile_run.DEFAULT_TIMEOUTS["nvidia_smi"] + \
        2 * profile_run.MAX_MOUNTS * profile_run.DEFAULT_TIMEOUTS["command"]
    assert cpu_only == static + 2 * cpu_bench.default_timeout_s(1, 2)
    assert task_timeout({}, "profile", benchmarks=["cpu"], benchmark_options={"cpu": {"timeout_s": 7}}, margin=0) == static + 14
    # the GPU benchmark runs once per GPU: the expected count, else GPUS_WHEN_UNKNOWN
    two = task_timeout({}, "profile", benchmarks=["gpu"], expect={"gpu_count": 2}, margin=0)
    unknown = task_timeout({}, "profile", benchmarks=["gpu"], margin=0)
    assert unknown - two == (_expect.GPUS_WHEN_UNKNOWN - 2) * gpu_bench.default_timeout_s(2.0, 10.0)
    with pytest.raises(AnsibleFilterError, match="benchmarks: unknown 'gpus'"):
        task_timeout({}, "profile", benchmarks=["gpus"])


def test_workload_is_the_selections_limits_and_none_when_one_has_none():
    plan = [{"name": "a", "timeout": 60}, {"name": "b", "timeout": 7200}]
    assert task_timeout(plan, "workload") == workload_run.IDLE_GUARD_S + 60 + 7200 + 2 * workload_run.PER_MODEL_SLACK_S + MARGIN
    assert task_timeout([], "workload") == MARGIN  # discover itself: no model runs
    assert task_timeout(plan + [{"name": "c", "timeout": None}], "workload") == 0  # timeout 0: no limit, no task timeout
    with pytest.raises(AnsibleFilterError, match="workload needs the 'workloads' list of a mode=discover run"):
        task_timeout({"workloads": plan}, "workload")


def test_the_gate_grows_with_the_nodes_two_scontrol_calls_each():
    base = task_timeout(30, "slurm_gate_apply", nodes=[], margin=0)
    reads = 1 + SlurmGateWorker.verify_reads
    assert base == math.ceil(30 * reads + (SlurmGateWorker.verify_reads - 1) * SlurmGateWorker.verify_pause_s)
    # per node: its re-read right before the change, and the drain or resume
    assert task_timeout(30, "slurm_gate_apply", nodes=["n1", "n2", "n3"], margin=0) == base + 3 * 2 * 30
    assert task_timeout(30, "slurm_gate_apply", nodes=3, margin=0) == base + 3 * 2 * 30


def test_gpu_modules_count_the_gpus_named_else_the_unknown_count():
    one = task_timeout(60, "gpu_settings_apply", gpus=["0"], margin=0)
    every = task_timeout(60, "gpu_settings_apply", gpus=[], margin=0)
    assert every > one and (every - one) % 60 == 0
    assert task_timeout(120, "mig_apply", gpus=[], margin=0) > task_timeout(120, "mig_apply", gpus=["0"], margin=0)


@pytest.mark.parametrize("value, module, options, message", [
    ({}, "ping", {}, r"module 'ping' is not one of doctor, profile"),
    ({}, "doctor", {"margin": "soon"}, r"margin 'soon' is not a number of seconds"),
    ("a minute", "gpu_settings_apply", {"gpus": []}, r"timeout 'a minute' is not a number of seconds"),
    (60, "gpu_settings_apply", {"gpus": "all"}, r"gpus must be a list of GPUs"),
    (30, "slurm_gate_apply", {"nodes": None}, r"nodes must be the list of nodes gated"),
])
def test_bad_input_is_one_line_naming_it(value, module, options, message):
    with pytest.raises(AnsibleFilterError, match=message):
        task_timeout(value, module, **options)


def _tasks(items):
    for item in items or []:
        yield item
        for key in ("block", "rescue", "always", "tasks"):
            yield from _tasks(item.get(key))


def test_every_long_task_of_the_playbooks_and_roles_has_its_modules_timeout():
    """doctor, profile, workload and the remediation modules: a task without one can hang the run on a dead host."""
    found, missing = [], []
    paths = glob.glob(os.path.join(REPO, "playbooks", "**", "*.yml"), recursive=True) + glob.glob(os.path.join(REPO, "roles", "*", "tasks", "*.yml"))
    for path in paths:
        with open(path) as handle:
            for task in _tasks(yaml.safe_load(handle)):
                for module in DEADLINES:
                    if "continuum.hydra.%s" % module in task:
                        found.append(module)
                        expected = r"continuum\.hydra\.task_timeout\('%s'" % module
                        if not re.search(expected, str(task.get("timeout", ""))):
                            missing.append("%s: %s" % (os.path.relpath(path, REPO), task.get("name")))
    assert not missing
    assert set(found) == set(DEADLINES)

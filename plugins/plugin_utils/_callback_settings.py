# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fleet_report callback's settings as the callback itself resolves them (ansible.cfg, environment, variables),
checked: read_settings() turns each bad value into a problem line and a fallback.

The action plugins that work on the callback's files (findings_ack, fleet_merge) read the same report_dir and
history_dir the callback writes to.
"""

import os
import re
from collections.abc import Mapping
from typing import Any, Callable, Optional

from ansible import constants as C
from ansible.errors import AnsibleError

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import state_files
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.batch_plan import BatchPlanError
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.batch_plan import validate as validate_batch
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.drift import ExpectedVersionsError, parse_expected
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.placement import DEFAULT_THRESHOLD as DEFAULT_PLACEMENT_THRESHOLD
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.placement import PlacementSettingError, threshold_value
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.stragglers import parse_rule
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import formats
from ansible_collections.continuum.hydra.plugins.plugin_utils._render._text import one_line

CALLBACK = "continuum.hydra.fleet_report"
_LOAD_NAME = "ansible_collections.continuum.hydra.plugins.callback.fleet_report"


def callback_option(name: str, task_vars: Any) -> Any:
    from ansible.plugins.loader import callback_loader  # pylint: disable=import-outside-toplevel

    # Loading the class registers the callback's option definitions, under its load name.
    plugin = callback_loader.get(CALLBACK, class_only=True)
    load_name = getattr(plugin, "_load_name", None) or _LOAD_NAME
    return C.config.get_config_value(name, plugin_type="callback", plugin_name=load_name, variables=task_vars)


def options_or_defaults(load_name: str, keys: Any, variables: Any, direct: Any, problems: list[str]) -> dict[str, Any]:
    """Every option of the callback, each bad one at its default with a problem line: one bad value
    (HYDRA_HISTORY_KEEP=ten) must not cost the report."""
    options = {}
    for name, spec in C.config.get_configuration_definitions("callback", load_name).items():
        try:
            options[name] = C.config.get_config_value(name, plugin_type="callback", plugin_name=load_name, keys=keys,
                                                      variables=variables, direct=direct)
        except AnsibleError as exc:
            options[name] = spec.get("default")
            problems.append("settings: %s; using the default %r" % (one_line(exc), spec.get("default")))
    return options


def read_settings(get_option: Callable[[str], Any], problems: list[str]) -> dict[str, Any]:
    """The options, checked: each bad one is a one-line problem and falls back to doing less, never to nothing."""
    chosen = [str(f).strip() for f in get_option("formats") or []]
    unknown = formats.unknown_formats(chosen)
    if unknown:
        problems.append("formats: %s unknown; accepted: %s" % (", ".join(repr(u) for u in unknown), ", ".join(formats.FORMAT_NAMES)))
    keep = get_option("history_keep")
    if keep is None or keep < 0:
        problems.append("history_keep: %r is not a number of runs (0 or more); history is off" % (keep,))
        keep = 0
    straggler_runs = get_option("straggler_history_runs")
    if straggler_runs is None or straggler_runs < 0:
        problems.append("straggler_history_runs: %r is not a number of runs (0 or more); stragglers are judged on this run"
                        % (straggler_runs,))
        straggler_runs = 0
    try:
        straggler_rule = parse_rule(get_option("straggler_rule") or [])
    except ValueError as exc:
        problems.append("straggler_rule: %s; using the default rule" % exc)
        straggler_rule = {}
    expected = None
    path = get_option("expected_versions")
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                expected = parse_expected(handle.read(), path)
        except OSError as exc:
            problems.append("expected_versions: cannot read %s: %s; drift is judged against the class majority" % (path, exc.strerror or exc))
        except ExpectedVersionsError as exc:
            problems.append("expected_versions: %s; drift is judged against the class majority" % exc)
    batch = None
    size = get_option("batch_global_size")
    if size is not None:
        memory = get_option("batch_memory_per_sample_mib")
        try:
            validate_batch(size, memory)
            batch = {"global_batch_size": size, "memory_per_sample_mib": memory, "metric": get_option("batch_metric")}
        except BatchPlanError as exc:
            problems.append("%s; no batch plan" % exc)
    try:
        placement_threshold = threshold_value(get_option("placement_threshold"))
    except PlacementSettingError as exc:
        problems.append("%s; using %g" % (exc, DEFAULT_PLACEMENT_THRESHOLD))
        placement_threshold = DEFAULT_PLACEMENT_THRESHOLD
    lock_wait = get_option("state_lock_timeout")
    if lock_wait is None or not 0 <= lock_wait < float("inf"):
        problems.append("state_lock_timeout: %r is not a number of seconds (0 or more); using %g"
                        % (lock_wait, state_files.DEFAULT_LOCK_WAIT_S))
        lock_wait = state_files.DEFAULT_LOCK_WAIT_S
    report_dir = get_option("report_dir")
    return {
        "report_dir": report_dir,
        "formats": [f for f in chosen if f not in unknown],
        "history_keep": keep,
        "state_lock_timeout": lock_wait,
        "straggler_history_runs": straggler_runs,
        "straggler_rule": straggler_rule,
        "history_dir": get_option("history_dir") or os.path.join(report_dir, "history"),
        "class_groups": [str(g) for g in get_option("class_groups") or []],
        "expected": expected,
        "batch": batch,
        "placement_threshold": placement_threshold,
    }


def report_dir(task_vars: Any) -> str:
    return str(callback_option("report_dir", task_vars))


def history_dir(task_vars: Any) -> str:
    return str(callback_option("history_dir", task_vars) or os.path.join(report_dir(task_vars), "history"))


# Running under AWX / Automation Controller (sources: docs/awx.md, Storage). AWX sets these extra vars on every job
# (each also with the prefix tower_), and these environment variables: AWX's JOB_ID and AWX_HOST, the control node's
# AWX_PRIVATE_DATA_DIR, and ansible-runner's AWX_ISOLATED_DATA_DIR (<private data dir>/artifacts/<job id>).
AWX_JOB_VARS = ("awx_job_id", "tower_job_id")
AWX_ENV_VARS = ("AWX_PRIVATE_DATA_DIR", "AWX_ISOLATED_DATA_DIR")
# Inside the execution environment the private data dir is mounted here (cwd /runner/project).
RUNNER_MOUNT = "/runner"
# The private data dir on the node itself: tempfile.mkdtemp(prefix="awx_<job id>_").
_PRIVATE_DIR_NAME = re.compile(r"^awx_\d+_")


def under_awx(extra_vars: Mapping[str, Any], environ: Mapping[str, str]) -> bool:
    """Whether this run is an AWX job: its extra vars or its environment say so."""
    if any(extra_vars.get(name) not in (None, "") for name in AWX_JOB_VARS):
        return True
    if any(environ.get(name) for name in AWX_ENV_VARS):
        return True
    return bool(environ.get("JOB_ID") and environ.get("AWX_HOST"))


def private_data_dirs(environ: Mapping[str, str], cwd: str) -> list[str]:
    """The directories that may be this AWX job's private data dir (deleted with the job), as absolute paths."""
    dirs = []
    if environ.get("AWX_PRIVATE_DATA_DIR"):
        dirs.append(environ["AWX_PRIVATE_DATA_DIR"])
    isolated = environ.get("AWX_ISOLATED_DATA_DIR")
    if isolated:
        # <private data dir>/artifacts/<job id>
        dirs.append(os.path.dirname(os.path.dirname(os.path.normpath(isolated))))
    dirs.append(RUNNER_MOUNT)
    path = os.path.normpath(cwd)
    while path != os.path.dirname(path):
        if _PRIVATE_DIR_NAME.match(os.path.basename(path)):
            dirs.append(path)
        path = os.path.dirname(path)
    return [os.path.normpath(d) for d in dirs if os.path.isabs(d)]


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def awx_storage_warning(report_dir: str, extra_vars: Mapping[str, Any], environ: Mapping[str, str], cwd: str) -> Optional[str]:
    """One line when this is an AWX job and report_dir (resolved against cwd) lies in the job's private data dir,
    which AWX deletes after the job; None otherwise."""
    if not under_awx(extra_vars, environ):
        return None
    resolved = os.path.normpath(os.path.join(cwd, os.path.expanduser(str(report_dir))))
    for directory in private_data_dirs(environ, cwd):
        if _inside(resolved, directory):
            return ("report_dir %s is inside this AWX job's private data dir %s, which AWX deletes after the job: the "
                    "reports, slice parts, history and findings are lost; set HYDRA_REPORT_DIR (or report_dir) to a "
                    "shared path exposed with AWX_ISOLATION_SHOW_PATHS or a container-group volume (docs/awx.md, "
                    "Storage); the set_stats summary stays in AWX" % (resolved, directory))
    return None

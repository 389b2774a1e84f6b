# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fleet_report callback's settings as the callback itself resolves them (ansible.cfg, environment, variables).

The action plugins that work on the callback's files (findings_ack, fleet_merge) read the same report_dir and
history_dir the callback writes to.
"""

import os
import re
from collections.abc import Mapping
from typing import Any, Optional

CALLBACK = "continuum.hydra.fleet_report"
_LOAD_NAME = "ansible_collections.continuum.hydra.plugins.callback.fleet_report"


def callback_option(name: str, task_vars: Any) -> Any:
    from ansible import constants as C  # pylint: disable=import-outside-toplevel
    from ansible.plugins.loader import callback_loader  # pylint: disable=import-outside-toplevel

    # Loading the class registers the callback's option definitions, under its load name.
    plugin = callback_loader.get(CALLBACK, class_only=True)
    load_name = getattr(plugin, "_load_name", None) or _LOAD_NAME
    return C.config.get_config_value(name, plugin_type="callback", plugin_name=load_name, variables=task_vars)


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

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fleet_report callback's settings as the callback itself resolves them (ansible.cfg, environment, variables).

The action plugins that work on the callback's files (findings_ack, fleet_merge) read the same report_dir and
history_dir the callback writes to.
"""

import os
from typing import Any

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

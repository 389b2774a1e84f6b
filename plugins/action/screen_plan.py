# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""continuum.hydra.screen_plan: which nodes playbooks/screen.yml screens this run (rotation), from the coverage store.

An action plugin, not a module: the store (screening.json beside the history) is the fleet_report callback's file on
the controller and the rule is controller code (plugin_utils/_fleet/coverage.py). It only reads the store (written
atomically, so a read without the lock sees a whole store); the callback records the screens at the end of the run.
The documentation is plugins/modules/screen_plan.py.
"""

import datetime
from typing import Any, Optional

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.continuum.hydra.plugins.plugin_utils import _callback_settings
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import coverage

ARGUMENT_SPEC = {
    "hosts": {"type": "list", "elements": "str", "required": True},
    "max_nodes": {"type": "int", "default": coverage.DEFAULT_MAX_NODES},
    "max_age_days": {"type": "float", "default": coverage.DEFAULT_MAX_AGE_DAYS},
    "history_dir": {"type": "path"},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Optional[str] = None, task_vars: Any = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            coverage.check_settings(args["max_nodes"], args["max_age_days"])
        except coverage.CoverageError as exc:
            return dict(result, failed=True, msg=str(exc))
        try:
            directory = args["history_dir"] or _callback_settings.history_dir(task_vars)
        except AnsibleError as exc:
            return dict(result, failed=True, msg="cannot find the screening store: %s" % " ".join(str(exc).split()))
        path = coverage.store_path(directory)
        problems = []
        try:
            store, why = coverage.read_store(path)
        except OSError as exc:  # a read past its deadline: screen in name order, say so
            store, why = coverage.empty(), " ".join(str(exc).split())
        if why:
            problems.append("screening: %s could not be read (%s): nodes chosen as if none was ever screened" % (path, why))
        rows = coverage.order(args["hosts"], store)
        chosen = [row["host"] for row in rows[:args["max_nodes"]]]
        now = datetime.datetime.now(datetime.timezone.utc)
        section = coverage.coverage(store, args["hosts"], {}, args["max_age_days"], now)
        result.update(
            changed=False, chosen=chosen, order=rows, store=path, problems=problems,
            screen_plan={"candidates": sorted(set(args["hosts"])), "chosen": chosen, "max_nodes": args["max_nodes"],
                         "max_age_days": args["max_age_days"]},
            msg="screening %d of %d nodes this run (at most %d, screened longest ago first): %s; before this run %d "
                "overdue and %d never screened (within %g days)" % (
                    len(chosen), len(rows), args["max_nodes"], ", ".join(chosen) or "none", len(section["overdue"]),
                    len(section["never"]), args["max_age_days"]))
        return result

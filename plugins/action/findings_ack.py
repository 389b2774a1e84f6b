# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""continuum.hydra.findings_ack: acknowledge (close) findings in the fleet report's findings store.

An action plugin, not a module: the store is the fleet_report callback's file on the controller, and the
logic that reads, acknowledges and writes it is the callback's own (plugin_utils/_fleet/findings.py), so
nothing is shipped to a target. The documentation is plugins/modules/findings_ack.py.
"""

import datetime
import getpass
import json
import os
from typing import Any, Optional

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.continuum.hydra.plugins.plugin_utils import _callback_settings
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import findings, state_files

ARGUMENT_SPEC = {
    "hosts": {"type": "list", "elements": "str", "required": True},
    "checks": {"type": "list", "elements": "str", "default": []},
    "note": {"type": "str", "default": ""},
    "by": {"type": "str"},
    "history_dir": {"type": "path"},
}


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


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
            directory = args["history_dir"] or _callback_settings.history_dir(task_vars)
        except AnsibleError as exc:
            return dict(result, failed=True, msg="cannot find the findings store: %s" % " ".join(str(exc).split()))
        path = findings.store_path(directory)
        if not os.path.exists(path):
            return dict(result, failed=True, msg="no findings store at %s (run playbooks/doctor.yml first)" % path)
        try:
            lock_wait = float(_callback_settings.callback_option("state_lock_timeout", task_vars))
        except (AnsibleError, TypeError, ValueError):
            lock_wait = state_files.DEFAULT_LOCK_WAIT_S
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        try:
            # Under the store's lock: a doctor run ending now must not write over this acknowledgement, nor it over the run.
            with state_files.locked(path, lock_wait):
                problems: list[str] = []
                state = findings.read_store(path, problems)
                if problems:
                    return dict(result, failed=True, msg=problems[0])
                new_state, closed = findings.acknowledge(state, args["hosts"], args["checks"], args["by"] or _user(), now, args["note"])
                if closed and not self._task.check_mode:
                    findings.write_store(path, new_state)
        except findings.AckError as exc:
            return dict(result, failed=True, msg=str(exc))
        except OSError as exc:  # locked by another run past the wait, a read past its deadline, a failed write
            return dict(result, failed=True, msg="%s not changed: %s" % (path, " ".join(str(exc).split())))
        lines = [findings.describe(f) for f in closed]
        verb = "would close" if self._task.check_mode else "closed"
        result.update(
            changed=bool(closed), store=path, closed=closed,
            msg="%s %d finding%s%s" % (verb, len(closed), "" if len(closed) == 1 else "s",
                                       (": " + "; ".join(lines)) if lines else " (the matching findings were already closed)"))
        if self._task.diff and closed:
            before = {findings.describe(f): {"open": True, "acknowledged": None} for f in closed}
            after = {findings.describe(f): {"open": False, "acknowledged": f["acknowledged"]} for f in closed}
            result["diff"] = {"before": json.dumps(before, indent=1, sort_keys=True) + "\n",
                              "after": json.dumps(after, indent=1, sort_keys=True) + "\n",
                              "before_header": path, "after_header": path}
        return result

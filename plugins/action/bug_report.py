# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""continuum.hydra.bug_report: the module takes the vendor's report on the node; this fetches it into the fleet
report's evidence directory (``<report_dir>/evidence/<host>/``), where the callback's per-GPU evidence files are.

The documentation is plugins/modules/bug_report.py.
"""

import os
import re
from typing import Any, Optional

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.continuum.hydra.plugins.plugin_utils import _callback_settings

# The names the evidence directory allows (the callback's evidence files follow the same rule).
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _safe(name: str) -> str:
    cleaned = _SAFE.sub("_", name).lstrip(".")
    return cleaned or "_"


class ActionModule(ActionBase):
    TRANSFERS_FILES = True
    _supports_check_mode = False
    _supports_async = False

    def run(self, tmp: Optional[str] = None, task_vars: Any = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        host = args.get("host") or (task_vars or {}).get("inventory_hostname") or "unknown"
        try:
            report_dir = args.get("report_dir") or _callback_settings.report_dir(task_vars)
        except AnsibleError as exc:
            return dict(result, failed=True, msg="cannot find the report directory: %s" % " ".join(str(exc).split()))
        found = self._execute_module(module_name="continuum.hydra.bug_report", module_args=args, task_vars=task_vars)
        if "remote_path" not in found:  # the module failed: its msg says why
            return dict(result, **found)
        remote = found["remote_path"]
        relative = os.path.join("evidence", _safe(host), _safe(os.path.basename(remote)))
        local = os.path.join(report_dir, relative)
        os.makedirs(os.path.dirname(local), exist_ok=True)
        try:
            self._connection.fetch_file(remote, local)
        except AnsibleError as exc:
            return dict(result, failed=True, msg="took %s on %s but could not fetch it: %s" % (remote, host, " ".join(str(exc).split())))
        fetched = os.path.getsize(local)
        if fetched != found["bytes"]:
            os.unlink(local)
            return dict(result, failed=True, msg="fetched %s from %s short (%d of %d bytes): removed" % (
                remote, host, fetched, found["bytes"]))
        result.update(found)
        result.update(changed=True, host=host, path=relative, report_dir=report_dir,
                      msg="%s: %s (%d bytes) in %s" % (host, relative, found["bytes"], report_dir))
        return result

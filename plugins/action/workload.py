# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""continuum.hydra.workload: hands the collection's own catalogue to the module when no catalogue is given.

The built-in catalogue (``workloads/`` at the collection root) lives on the controller; a module only ships its
Python code to the target. When the task names neither ``catalogue`` nor ``catalogue_files``, this plugin reads
the catalogue's text files and passes them as ``catalogue_files``; the module writes them to a temporary
directory on the target. The documentation is plugins/modules/workload.py.
"""

import os
from typing import Any, Optional

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

BUILTIN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))), "workloads")
SKIPPED_DIRS = ("__pycache__",)
MAX_BYTES = 1024 * 1024


def builtin_catalogue_files(root: str = BUILTIN) -> dict[str, str]:
    """{relative path: text} of every file of the built-in catalogue."""
    files: dict[str, str] = {}
    total = 0
    for directory, dirs, names in os.walk(root):
        dirs[:] = sorted(name for name in dirs if name not in SKIPPED_DIRS)
        for name in sorted(names):
            if name.endswith(".pyc"):
                continue
            path = os.path.join(directory, name)
            try:
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
            except (OSError, UnicodeDecodeError) as exc:
                raise AnsibleError("workload: cannot read the built-in catalogue file %s: %s" % (path, exc)) from None
            total += len(text)
            files[os.path.relpath(path, root).replace(os.sep, "/")] = text
    if "models.json" not in files:
        raise AnsibleError("workload: the built-in catalogue %s has no models.json (an incomplete collection install?)" % root)
    if total > MAX_BYTES:
        raise AnsibleError("workload: the built-in catalogue %s holds %d bytes, more than %d" % (root, total, MAX_BYTES))
    return files


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = True

    def run(self, tmp: Optional[str] = None, task_vars: Any = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        if not args.get("catalogue") and not args.get("catalogue_files"):
            try:
                args["catalogue_files"] = builtin_catalogue_files()
            except AnsibleError as exc:
                return dict(result, failed=True, msg=str(exc))
        wrap_async = self._task.async_val and not self._connection.has_native_async
        result.update(self._execute_module(module_name="continuum.hydra.workload", module_args=args, task_vars=task_vars,
                                           wrap_async=wrap_async))
        if not wrap_async:
            # as ansible.builtin.normal: the module's temporary directory goes now, unless async still needs it
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

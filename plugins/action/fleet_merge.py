# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""continuum.hydra.fleet_merge: merge the parts of a sliced doctor run (playbooks/merge.yml).

An action plugin, not a module: the parts are the fleet_report callback's files on the controller (and the AWX
artifacts in the extra vars); the merge is plugin_utils/_fleet/parts.py. The callback recognises this task's
result, reads the merged hosts from the file the action leaves (parts.merged_path: a task result of many hosts is
slow and large in Ansible) and writes the merged report in every format, as for any run. The documentation is
plugins/modules/fleet_merge.py.
"""

import datetime
from typing import Any, Optional

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.continuum.hydra.plugins.module_utils._atomic import write_atomic
from ansible_collections.continuum.hydra.plugins.plugin_utils import _callback_settings
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import parts
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import cyclic_gc_paused
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import build_report
from ansible_collections.continuum.hydra.plugins.plugin_utils._render.awx import set_stats_data

ARGUMENT_SPEC = {
    "workflow_job_id": {"type": "raw"},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "parts": {"type": "dict", "default": {}},
    "report_dir": {"type": "path"},
}


def _workflow_id(args: dict[str, Any], task_vars: Any) -> Any:
    """The slices' workflow id: given, else the one the slices' artifacts carry, else this job's awx_workflow_job_id.

    In an AWX workflow the merge node sees the *outer* workflow's id while the slices share the inner sliced
    workflow's id (../docs/awx.md), so the artifacts the slices passed down are the better witness.
    """
    if args.get("workflow_job_id") not in (None, ""):
        return args["workflow_job_id"]
    carried = sorted({str(part.get("workflow_job_id")) for part in (args.get("parts") or {}).values()
                      if isinstance(part, dict) and part.get("workflow_job_id") is not None})
    if len(carried) > 1:
        raise parts.PartError("workflow_job_id: the slices' artifacts name several workflows (%s); give "
                              "hydra_workflow_job_id" % ", ".join(carried))
    if carried:
        return carried[0]
    return (task_vars or {}).get("awx_workflow_job_id")


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
            workflow_id = parts.clean_id(_workflow_id(args, task_vars), "workflow_job_id")
            report_dir = args["report_dir"] or _callback_settings.report_dir(task_vars)
        except (parts.PartError, AnsibleError) as exc:
            return dict(result, failed=True, msg=" ".join(str(exc).split()))
        problems: list[str] = []
        path = parts.merged_path(report_dir, workflow_id)
        with cyclic_gc_paused():  # the parts' millions of objects: full collections walking them all cost more per host
            merged = parts.merge(parts.read_part_files(report_dir, workflow_id), args["parts"], workflow_id, args["hosts"], problems)
            now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            report = build_report(merged["hosts"], now, "merge.yml")
            try:
                write_atomic(path, parts.merged_text(merged))
            except OSError as exc:
                return dict(result, failed=True, msg="cannot write the merged hosts for the fleet_report callback: %s" % " ".join(str(exc).split()))
        info = merged["merge"]
        result.update(
            changed=False, stats=set_stats_data(report), merged_file=path, merge=info, problems=problems,
            msg="merged %d part%s of workflow %s: %d host%s, %d missing%s" % (
                len(info["jobs"]), "" if len(info["jobs"]) == 1 else "s", workflow_id, len(report["hosts"]),
                "" if len(report["hosts"]) == 1 else "s", info["missing"],
                "; %d problem%s" % (len(problems), "" if len(problems) == 1 else "s") if problems else ""))
        return result

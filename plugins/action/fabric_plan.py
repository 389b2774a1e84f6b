# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""continuum.hydra.fabric_plan: judge the last round of the fabric test and plan the next one, on the controller.

An action plugin: which hosts test together and what the rounds prove is controller work on every host's result
(plugin_utils/_fleet/fabric.py); only the ranks run on the hosts (the fabric module). Run once per round by
playbooks/fabric.yml (run_once), it reads each host's rank result from hostvars, so the rounds need no recursion
in the playbook. The documentation is plugins/modules/fabric_plan.py.
"""

import os
import secrets
from collections.abc import Mapping
from typing import Any, Optional

from ansible.plugins.action import ActionBase

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import fabric

ARGUMENT_SPEC = {
    "hosts": {"type": "list", "elements": "str", "required": True},
    "live": {"type": "list", "elements": "str"},
    "state": {"type": "dict"},
    "result_var": {"type": "str", "default": "hydra_fabric_rank"},
    "idle_var": {"type": "str"},
    "mode": {"type": "str", "choices": list(fabric.MODES), "default": "auto"},
    "pairwise_max": {"type": "int", "default": 4},
    "relative_margin": {"type": "float", "default": 0.25},
    "confirmations": {"type": "int", "default": 2},
    "max_rounds": {"type": "int"},
    "port_dir": {"type": "path", "default": "/tmp"},
}


def _address(host_vars: Mapping[str, Any], host: str) -> str:
    """Where a host's rank binds and is reached: fabric_address, else the inventory address, else its name."""
    for name in ("fabric_address", "ansible_host"):
        value = host_vars.get(name)
        if value:
            return str(value)
    return host


def _idle(hosts: list[str], hostvars: Mapping[str, Any], idle_var: Optional[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(busy, forced): host -> the idle guard's line, from what the fabric module's ``mode: idle`` registered as
    ``idle_var`` on each host. A host with no such result was not confirmed idle: busy. No idle_var: no guard."""
    busy: dict[str, str] = {}
    forced: dict[str, str] = {}
    if not idle_var:
        return busy, forced
    for host in hosts:
        registered = (hostvars.get(host) or {}).get(idle_var)
        guard = registered.get("idle") if isinstance(registered, Mapping) else None
        if not isinstance(guard, Mapping):
            why = registered.get("msg") if isinstance(registered, Mapping) else None
            busy[host] = "cannot confirm the node is idle: the idle check (%s) returned no result%s" % (
                idle_var, ": %s" % " ".join(str(why).split()) if why else "")
        elif guard.get("refused"):
            busy[host] = str(guard["refused"])
        elif guard.get("forced"):
            forced[host] = str(guard["forced"])
    return busy, forced


def _rank_result(registered: Any, run_id: str) -> Optional[dict[str, Any]]:
    """The module's ``fabric`` result of this run from what async_status registered; None when there is none."""
    if not isinstance(registered, Mapping):
        return None
    result = registered.get("fabric")
    if not isinstance(result, Mapping) or result.get("run_id") != run_id:
        return None  # not finished, failed without a result, skipped, or an earlier round's
    return dict(result)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Optional[str] = None, task_vars: Any = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        hostvars = (task_vars or {}).get("hostvars") or {}
        try:
            state = args["state"]
            if not state:
                floors = {host: fabric.floor_of((hostvars.get(host) or {}).get("hydra_expect")) for host in args["hosts"]}
                live_hosts = [h for h in args["hosts"] if args["live"] is None or h in args["live"]]
                busy, forced = _idle(live_hosts, hostvars, args["idle_var"])
                state = fabric.start(args["hosts"], floors, {
                    "mode": args["mode"], "pairwise_max": args["pairwise_max"], "relative_margin": args["relative_margin"],
                    "confirmations": args["confirmations"], "max_rounds": args["max_rounds"]}, busy, forced)
            elif state.get("plan"):
                outcomes = {}
                for group in state["plan"]["groups"]:
                    results = {host: _rank_result((hostvars.get(host) or {}).get(args["result_var"]), group["run_id"])
                               for host in group["members"]}
                    outcomes[group["id"]] = fabric.group_outcome(group, results)
                state = fabric.record(state, outcomes)
            live = args["live"]
            if live is not None:
                fabric.mark_unreachable(state, [h for h in state["hosts"] if h not in live])
            state = fabric.next_round(state)
        except fabric.FabricPlanError as exc:
            return dict(result, failed=True, msg=str(exc))
        assignments: dict[str, dict[str, Any]] = {}
        plan = state.get("plan")
        if plan:
            for group in plan["groups"]:
                group["run_id"] = "%s-%s" % (group["id"], secrets.token_hex(4))
                token = secrets.token_hex(16)
                members = group["members"]
                master_address = _address(hostvars.get(members[0]) or {}, members[0])
                for rank, host in enumerate(members):
                    assignments[host] = {
                        "round": plan["round"], "group": group["id"], "run_id": group["run_id"], "token": token,
                        "rank": rank, "world": len(members), "master": members[0], "master_address": master_address,
                        "address": _address(hostvars.get(host) or {}, host),
                        "port_file": os.path.join(args["port_dir"], "hydra-fabric-%s.port" % group["run_id"]),
                    }
        result.update(changed=False, done=state["done"], round=plan["round"] if plan else None,
                      stage=plan["stage"] if plan else None, max_rounds=state["max_rounds"], assignments=assignments,
                      masters=sorted({a["master"] for a in assignments.values()}), state=state)
        if state["done"]:
            result["fabric"] = fabric.section(state)
            result["checks"] = fabric.host_checks(state)
            result["msg"] = fabric.summary_line(state)
        else:
            count = len(plan["groups"])
            result["msg"] = "round %d (%s): %d group%s" % (plan["round"], plan["stage"], count, "" if count == 1 else "s")
        return result

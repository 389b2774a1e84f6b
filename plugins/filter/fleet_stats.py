# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: fleet_stats
short_description: The fleet summary as ansible.builtin.set_stats data, for AWX workflows
version_added: 0.1.0
description:
  - Summarises doctor results into one dictionary under the key C(hydra_fleet) - C(totals) (hosts per status, as in
    the fleet report), C(failing_hosts) (status V(failed), V(error), V(unreachable) or V(task_failed)),
    C(warning_hosts), C(failing_checks) (check id to the number of hosts where it is C(FAIL) or C(ERROR)), C(ok)
    (true when no host is failing) and C(generated_at).
  - Given a fleet report (C(fleet-report.json) read with C(from_json)) that holds an analysis, it adds
    C(straggler_hosts), C(drift_hosts) and C(bottleneck).
  - Pass the result to M(ansible.builtin.set_stats) with O(ansible.builtin.set_stats#module:per_host=false);
    AWX and Automation Controller store it as the job's artifacts and hand it to the next workflow nodes as
    extra variables, so a workflow can branch on C(hydra_fleet.ok) or C(hydra_fleet.totals.failed).
  - With C(hostvars) as input, a host without a result is V(unreachable), a failed doctor task without checks is
    V(task_failed), and a skipped doctor task is V(unchecked).
author:
  - continuum.hydra developers
options:
  _input:
    description: C(hostvars), or a fleet report dict.
    type: dict
    required: true
  hosts:
    description:
      - The hosts to summarise; required with C(hostvars) (usually C(ansible_play_hosts_all)).
      - Ignored for a fleet report, which holds its hosts.
    type: list
    elements: str
  result_var:
    description: The variable each host registered its doctor result in (C(hostvars) input only).
    type: str
    default: hydra_doctor
seealso:
  - module: ansible.builtin.set_stats
  - module: continuum.hydra.doctor
  - plugin: continuum.hydra.fleet_report
    plugin_type: callback
"""

EXAMPLES = r"""
- name: Publish the fleet summary as the job's artifacts (run once, after doctor registered hydra_doctor)
  ansible.builtin.set_stats:
    data: "{{ hostvars | continuum.hydra.fleet_stats(ansible_play_hosts_all) }}"
    per_host: false
  run_once: true

- name: The same from a saved fleet report
  ansible.builtin.set_stats:
    data: "{{ lookup('ansible.builtin.file', 'reports/fleet-report.json') | from_json | continuum.hydra.fleet_stats }}"
"""

RETURN = r"""
_value:
  description: The summary, under the key C(hydra_fleet).
  type: dict
  sample: {"hydra_fleet": {"generated_at": "2026-11-22T13:00:00+00:00", "ok": false,
           "totals": {"hosts": 3, "healthy": 1, "warning": 1, "error": 0, "failed": 1, "unreachable": 0, "task_failed": 0},
           "failing_hosts": ["gpu-b"], "warning_hosts": ["gpu-c"], "failing_checks": {"gpu.ecc_errors": 1}}}
"""

import datetime
from collections.abc import Callable, Iterable
from typing import Any, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import REPORT_KIND, FleetCollector
from ansible_collections.continuum.hydra.plugins.plugin_utils._render.awx import set_stats_data


def fleet_stats(source: Any, hosts: Optional[Iterable[str]] = None, result_var: str = "hydra_doctor") -> dict[str, dict[str, Any]]:
    if isinstance(source, dict) and source.get("kind") == REPORT_KIND:
        for key in ("hosts", "totals", "failing", "generated_at"):
            if key not in source:
                raise AnsibleFilterError("fleet_stats: the fleet report has no %r; give a whole fleet-report.json" % key)
        return set_stats_data(source)
    if hosts is None:
        raise AnsibleFilterError("fleet_stats: give the hosts to summarise (hostvars | fleet_stats(ansible_play_hosts_all)), "
                                 "or pass a fleet report (its 'kind' is %s)" % REPORT_KIND)
    if isinstance(hosts, (str, bytes)) or not hasattr(hosts, "__iter__"):
        raise AnsibleFilterError("fleet_stats: hosts must be a list of host names, got %r" % (hosts,))
    return set_stats_data(hostvars_report(source, hosts, result_var, "fleet_stats"))


def hostvars_report(source: Any, hosts: Iterable[str], result_var: str, caller: str) -> dict[str, Any]:
    """The fleet report of the hosts' registered doctor results (FleetCollector.from_hostvars), generated now; a bad
    input is one AnsibleFilterError naming the caller."""
    try:
        collector = FleetCollector.from_hostvars(source, hosts, result_var)
    except TypeError as exc:
        raise AnsibleFilterError("%s: %s" % (caller, exc)) from exc
    return collector.build(datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"fleet_stats": fleet_stats}

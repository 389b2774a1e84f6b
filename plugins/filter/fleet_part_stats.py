# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: fleet_part_stats
short_description: One AWX slice's fleet summary as ansible.builtin.set_stats data, under its own key
version_added: 0.2.0
description:
  - The C(hydra_fleet) summary of P(continuum.hydra.fleet_stats#filter) for the hosts of one slice of a sliced AWX
    job, plus C(workflow_job_id), C(job_id), C(host_statuses) (each host's status) and C(host_checks), under the key
    C(hydra_fleet_part_<job_id>) - AWX merges the slices' artifacts shallowly, so each slice needs its own key.
  - C(host_checks) maps each failing or warning host to the ids of its checks by status (keys V(FAIL), V(ERROR) and
    V(WARN), worst first, ids in name order, a status without ids left out) and C(more), so that a merge from the
    artifacts alone (no shared storage) says what failed where. At most 8 ids per host, C(more) counts the rest; no
    messages or details (C(docs/awx.md) gives the size per host).
  - C(playbooks/merge.yml) merges these (and the part files) into one report; see C(docs/awx.md).
author:
  - continuum.hydra developers
options:
  _input:
    description: C(hostvars).
    type: dict
    required: true
  hosts:
    description: The slice's hosts.
    type: list
    elements: str
    required: true
  workflow_job_id:
    description: C(awx_workflow_job_id).
    type: raw
    required: true
  job_id:
    description: C(awx_job_id).
    type: raw
    required: true
  result_var:
    description: The variable each host registered its doctor result in.
    type: str
    default: hydra_doctor
"""

EXAMPLES = r"""
- name: Publish this slice's summary
  ansible.builtin.set_stats:
    data: "{{ hostvars | continuum.hydra.fleet_part_stats(slice_hosts, awx_workflow_job_id, awx_job_id) }}"
    per_host: false
"""

RETURN = r"""
_value:
  description: The summary, under the key C(hydra_fleet_part_<job_id>).
  type: dict
  sample: {"hydra_fleet_part_101": {"generated_at": "2026-11-22T13:00:00+00:00", "ok": false,
           "totals": {"hosts": 2, "healthy": 1, "warning": 0, "error": 0, "failed": 1, "unreachable": 0, "task_failed": 0},
           "failing_hosts": ["n1"], "warning_hosts": [], "failing_checks": {"gpu.ecc_errors": 1},
           "workflow_job_id": "77", "job_id": "101", "host_statuses": {"n1": "failed", "n3": "healthy"},
           "host_checks": {"n1": {"FAIL": ["gpu.ecc_errors"], "WARN": ["gpu.persistence_mode"], "more": 0}}}}
"""

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.continuum.hydra.plugins.filter.fleet_stats import hostvars_report
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import parts
from ansible_collections.continuum.hydra.plugins.plugin_utils._render.awx import set_stats_data


def fleet_part_stats(source: Any, hosts: Iterable[str], workflow_job_id: Any, job_id: Any,
                     result_var: str = "hydra_doctor") -> dict[str, dict[str, Any]]:
    """A slice's summary under its own key hydra_fleet_part_<job_id> (AWX keeps one value per key): see docs/awx.md."""
    if not isinstance(source, Mapping) or isinstance(hosts, (str, bytes)):
        raise AnsibleFilterError("fleet_part_stats: give hostvars and the slice's list of hosts")
    try:
        workflow_id, job = parts.clean_id(workflow_job_id, "awx_workflow_job_id"), parts.clean_id(job_id, "awx_job_id")
    except parts.PartError as exc:
        raise AnsibleFilterError("fleet_part_stats: %s" % exc) from exc
    report = hostvars_report(source, list(hosts), result_var, "fleet_part_stats")
    return parts.part_summary(set_stats_data(report)["hydra_fleet"], report["hosts"], workflow_id, job)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"fleet_part_stats": fleet_part_stats}

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: fleet_part_stats
short_description: One AWX slice's fleet summary as ansible.builtin.set_stats data, under its own key
version_added: 0.2.0
description:
  - The C(hydra_fleet) summary of P(continuum.hydra.fleet_stats#filter) for the hosts of one slice of a sliced AWX
    job, plus C(workflow_job_id), C(job_id) and C(host_statuses) (each host's status, no details), under the key
    C(hydra_fleet_part_<job_id>) - AWX merges the slices' artifacts shallowly, so each slice needs its own key.
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
"""

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.continuum.hydra.plugins.filter.fleet_stats import _collect
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
    report = _collect(source, list(hosts), result_var)
    statuses = dict((name, entry["status"]) for name, entry in report["hosts"].items())
    return parts.part_summary(set_stats_data(report)["hydra_fleet"], statuses, workflow_id, job)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"fleet_part_stats": fleet_part_stats}

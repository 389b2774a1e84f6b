"""Which workflow the merge gathers: the merge node of an AWX workflow sees the outer workflow's id, not the slices'."""

import pytest

from ansible_collections.continuum.hydra.plugins.action.fleet_merge import _workflow_id
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.parts import PartError

OUTER = {"awx_workflow_job_id": 900}  # the merge job's own variables inside a user workflow


def test_the_slices_artifacts_name_the_workflow_when_none_is_given():
    carried = {"hydra_fleet_part_101": {"workflow_job_id": "77"}, "hydra_fleet_part_102": {"workflow_job_id": "77"}}
    assert _workflow_id({"parts": carried}, OUTER) == "77"


def test_a_given_id_wins_and_without_artifacts_the_jobs_own_id_is_used():
    assert _workflow_id({"workflow_job_id": "55", "parts": {"hydra_fleet_part_1": {"workflow_job_id": "77"}}}, OUTER) == "55"
    assert _workflow_id({"parts": {}}, OUTER) == 900


def test_artifacts_of_several_workflows_are_an_error_naming_them():
    mixed = {"hydra_fleet_part_1": {"workflow_job_id": "77"}, "hydra_fleet_part_2": {"workflow_job_id": "78"}}
    with pytest.raises(PartError, match=r"several workflows \(77, 78\)"):
        _workflow_id({"parts": mixed}, OUTER)

"""The batch plan's files written in pieces (_render/batch_plan.py): the same text as one yaml.safe_dump / json.dumps."""

import copy
import json

import pytest
import yaml

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import batch_plan
from ansible_collections.continuum.hydra.tests.support.fleet_factory import SyntheticFleet
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import hostile_report

DUMPERS = [None] + ([batch_plan.FAST_DUMPER] if batch_plan.FAST_DUMPER is not None else [])


def _plan(fleet):
    report = fleet.report()
    analyse(report, AnalysisOptions(batch={"global_batch_size": 16 * len(fleet.hosts), "memory_per_sample_mib": 500}))
    return report["analysis"]["batch_plan"]


def _odd_plan():
    """A plan whose keys and strings the two YAML emitters write differently (an empty key, a 128-byte one, line
    breaks, non-ASCII): entries that must go through PyYAML's own emitter."""
    plan = _plan(SyntheticFleet({"t4x1": 6}, seed=3))
    first = sorted(plan["hosts"])[0]
    plan["hosts"]["x" * 128] = copy.deepcopy(plan["hosts"][first])
    plan["hosts"][""] = {"batch_size": 1, "gpus": [{"name": "A " * 70, "uuid": None, "index": 0}]}
    plan["hosts"]["\u00e9-h\u00f6st\nnew: line"] = {"batch_size": 2, "gpus": []}
    plan["excluded_hosts"].update({"- dash": "status: failed " * 10, "? q": "", "\u00e9" * 70: "not profiled"})
    return plan


@pytest.mark.parametrize("fast", DUMPERS)
@pytest.mark.parametrize("make", [lambda: _plan(SyntheticFleet({"a100x8": 30, "t4x1": 12}, seed=5)), _odd_plan,
                                  lambda: hostile_report()["analysis"]["batch_plan"]], ids=["fleet", "odd", "hostile"])
def test_the_yaml_in_pieces_is_one_safe_dump(make, fast):
    plan = make()
    assert plan["hosts"] and plan["excluded_hosts"] is not None
    pieces = list(batch_plan.yaml_text(plan, fast))
    assert "".join(pieces) == yaml.safe_dump(plan, sort_keys=True, default_flow_style=False)
    assert len(pieces) >= len(plan["hosts"])  # a piece per host: never the whole plan's nodes at once


def test_a_plan_without_hosts_and_the_json_are_the_same_text():
    plan = _plan(SyntheticFleet({"t4x1": 3}, seed=1))
    plan.update(hosts={}, error="no GPU with a bf16_tflops figure on a healthy or warning host: nothing to plan")
    assert "".join(batch_plan.yaml_text(plan)) == yaml.safe_dump(plan, sort_keys=True, default_flow_style=False)
    assert "".join(batch_plan.json_pieces(plan)) == json.dumps(plan, indent=1, sort_keys=True) + "\n"


def test_only_plain_strings_go_through_libyaml():
    assert batch_plan._plain({"a100x8-00001": {"gpus": [{"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-1a-2b", "batch_size": 3}]}})
    for odd in ("", "x" * 100, " lead", "trail ", "a\nb", "\u00e9", "a#b", "a'b", 'a"b'):
        assert not batch_plan._plain({odd: 1}) and not batch_plan._plain({"k": [odd]})


@pytest.mark.skipif(batch_plan.FAST_DUMPER is None, reason="PyYAML without libyaml")
def test_libyaml_writes_an_empty_key_unlike_pyyaml():
    """Why only plain entries go through libyaml: its emitter writes some keys differently from PyYAML's."""
    entry = {"": {"batch_size": 1}}
    fast = yaml.dump(entry, Dumper=batch_plan.FAST_DUMPER, sort_keys=True, default_flow_style=False)
    assert fast != yaml.safe_dump(entry, sort_keys=True, default_flow_style=False)

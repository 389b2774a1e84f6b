"""The callback's side of playbooks/merge.yml: the merged hosts come in the file the fleet_merge action leaves."""

import json

from ansible_collections.continuum.hydra.plugins.callback.fleet_report import CallbackModule
from ansible_collections.continuum.hydra.plugins.module_utils._status import MISSING
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import parts
from ansible_collections.continuum.hydra.tests.support.helpers import CapturedDisplay


def _callback():
    module = CallbackModule()
    module._display = CapturedDisplay()
    return module


def test_the_merged_hosts_are_taken_from_the_file_which_is_then_removed(tmp_path):
    merged = parts.merge([], {}, "77", ["n1", "n2"], [])
    path = tmp_path / "merged.jsonl"
    path.write_text("".join(parts.merged_text(merged)))
    module = _callback()
    module._take_merge({"merged_file": str(path), "merge": merged["merge"], "problems": ["parts: job-9.json is corrupt"]})
    assert sorted(module._collector.hosts) == ["n1", "n2"] and module._collector.hosts["n1"]["status"] == MISSING
    assert module._merge["missing"] == 2 and module._problems == ["parts: job-9.json is corrupt"]
    assert not path.exists()


def test_an_unreadable_merged_file_is_one_problem_line_never_an_error(tmp_path):
    path = tmp_path / "merged.jsonl"
    path.write_text(json.dumps({"kind": "something else"}))
    module = _callback()
    module._take_merge({"merged_file": str(path), "merge": {"missing": 0}})
    assert module._collector.hosts == {} and module._ran_hydra_task
    assert len(module._problems) == 1 and module._problems[0].startswith("merge: the merged hosts were not read from %s: " % path)
    assert path.exists()  # left for a look: the hosts are in it
    module._take_merge({"merged_file": str(tmp_path / "gone.json"), "merge": {}})
    assert len(module._problems) == 2 and "gone.json" in module._problems[1]

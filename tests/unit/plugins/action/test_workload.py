"""The workload action plugin hands the collection's own catalogue to the module as file contents."""

import json

import pytest
from ansible.errors import AnsibleError

from ansible_collections.continuum.hydra.plugins.action import workload


def test_the_built_in_catalogue_is_read_whole_without_caches():
    files = workload.builtin_catalogue_files()
    assert {"models.json", "scripts/train_step/train_step.py", "scripts/h2d_copy/h2d_copy.py",
            "scripts/allreduce/allreduce.py"} <= set(files)
    assert not any("__pycache__" in path or path.endswith(".pyc") for path in files)
    assert [model["name"] for model in json.loads(files["models.json"])][:3] == ["train_step", "h2d_copy", "allreduce"]


def test_a_catalogue_without_models_json_is_an_error(tmp_path):
    (tmp_path / "scripts").mkdir()
    with pytest.raises(AnsibleError, match="has no models.json"):
        workload.builtin_catalogue_files(str(tmp_path))

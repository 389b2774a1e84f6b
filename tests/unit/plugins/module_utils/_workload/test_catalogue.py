"""madengine-compatible selection, against madengine's own public test catalogue (tests/fixtures/madengine-dummy).

Every expected list below is what madengine's DiscoverModels (ROCm/madengine ef87d05e,
src/madengine/utils/discover_models.py, with its CLI's comma splitting) selects on that catalogue; they were
produced by running it there, and agree with its tests (tests/unit/test_discover_models.py,
tests/e2e/test_build_workflows.py::TestDiscover).
"""

import json
import sys

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._workload import catalogue
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path

DUMMY = fixture_path("madengine-dummy")
ROOT_NAMES = [
    "dummy", "dummy2", "dummy3", "dummy_timeout", "dummy_sleep", "dummy_ctxtest", "dummy_mountpath", "dummy_gpubind",
    "dummy_cpubind", "dummy_skip_gpu_arch", "dummy_data_local", "dummy_data_local_fail", "dummy_prof", "dummy_prof_rccl",
    "dummy_multi", "dummy_superset", "dummy_data_aws", "dummy_data_minio", "dummy_data_austin_nas", "dummy_torchrun",
    "dummy_torchrun_multi", "dummy_torchrun_helper", "dummy_torchrun_data_minio", "dummy_torchrun_data_nas",
    "dummy_megatron_lm", "dummy_deepspeed", "dummy_vllm", "dummy_sglang", "dummy_sglang_disagg", "dummy_torchtitan",
    "pyt_huggingface_gpt2", "pyt_huggingface_bert", "dummy_rocenv_full", "dummy_therock"]
DIR_NAMES = ["dummy2/model1", "dummy2/model2", "dummy3/model3", "dummy3/model4"]


def names(tags, root=DUMMY):
    return [model["name"] for model in catalogue.Catalogue(root).select(tags)]


@pytest.mark.parametrize("tags, expected", [
    (["dummy"], ["dummy"]),  # a root model by name
    (["dummy2/model2"], ["dummy2/model2"]),  # a directory model by scoped name
    (["dummy3/model4"], ["dummy3/model4"]),  # a get_models_json.py model by scoped name
    (["dummy2/all"], ["dummy2/model1", "dummy2/model2"]),  # scoped all
    (["dummy3/all"], ["dummy3/model3", "dummy3/model4"]),
    (["dummy3/dummy_test_group_3"], ["dummy3/model3", "dummy3/model4"]),  # scoped tag
    (["dummy_group_1"], ["dummy", "dummy2"]),  # a shared tag
    (["inference"], ["dummy_vllm", "dummy_sglang", "dummy_sglang_disagg"]),
    # madengine's e2e test_multiple: root, directory, then dynamic models, in tag order
    (["dummy_test_group_1,dummy_test_group_2,dummy_test_group_3"],
     ["dummy", "dummy2/model1", "dummy2/model2", "dummy3/model3", "dummy3/model4"]),
    (["dummy_test_group_1", "dummy_group_1"], ["dummy", "dummy", "dummy2"]),  # no de-duplication
    (["dummy2:dummy_2"], ["dummy2"]),  # the README's "dir:name" is the root model dummy2 with a flag
    (["dummies"], ROOT_NAMES[:30] + ROOT_NAMES[32:] + DIR_NAMES),  # the pyt_huggingface_* models lack the tag
    (["all"], ROOT_NAMES + DIR_NAMES),
])
def test_selection_matches_madengine(tags, expected):
    assert names(tags) == expected


def test_tag_parameters_are_appended_to_args_as_flags():
    (model,) = catalogue.Catalogue(DUMMY).select(["dummy3/model4:batch_size=512:in=32:fast"])
    assert model["args"] == " --batch_size 512 --in 32 --fast"
    assert model["scripts"] == "scripts/dummy3/run.sh"
    (model,) = catalogue.Catalogue(DUMMY).select(["dummy2/model2:batch-size=32"])
    assert (model["name"], model["args"]) == ("dummy2/model2", " --batch-size 32")
    (model,) = catalogue.Catalogue(DUMMY).select(["dummy2:dummy_2"])
    assert (model["args"], model["scripts"]) == (" --dummy_2", "scripts/dummy/run.sh")
    (model,) = catalogue.Catalogue(DUMMY).select(["dummy_superset:x=1"])
    assert model["args"] == "--config configs/default.csv --x 1"


@pytest.mark.parametrize("tag", ["nosuch", "model2", "dummy2/nosuch", "dummy2/model2:x=1,nosuch"])
def test_a_tag_that_matches_nothing_is_madengines_error(tag):
    with pytest.raises(catalogue.CatalogueError) as info:
        names([tag])
    assert str(info.value) == "No models found corresponding to the given tag: %s" % tag.split(",")[-1]


def test_names_lists_every_model_in_discovery_order():
    assert catalogue.Catalogue(DUMMY).names() == ROOT_NAMES + DIR_NAMES


def test_dynamic_models_load_without_madengine_installed_and_leave_no_shim_behind():
    assert "madengine" not in sys.modules
    (model3, model4) = catalogue.Catalogue(DUMMY).select(["dummy3/all"])
    assert "madengine" not in sys.modules and "madengine.utils.discover_models" not in sys.modules
    assert model3["n_gpus"] == "-1" and model3["timeout"] == 7200 and model3["tags"] == ["dummies", "dummy_test_group_3"]
    assert model4["owner"] == "mad.support@amd.com"  # filled by its update_model()


def test_a_dynamic_model_selected_twice_keeps_its_paths(tmp_path):
    # madengine prefixes model3's paths twice here (it mutates the shared object); hydra copies first.
    selected = catalogue.Catalogue(DUMMY).select(["dummy3/model3", "dummy_test_group_3"])
    assert [(m["name"], m["scripts"]) for m in selected] == [
        ("dummy3/model3", "scripts/dummy3/run.sh"), ("dummy3/model3", "scripts/dummy3/run.sh"), ("dummy3/model4", "scripts/dummy3/run.sh")]


def make(tmp_path, root, dirs=None):
    (tmp_path / "models.json").write_text(json.dumps(root))
    (tmp_path / "scripts").mkdir(exist_ok=True)
    for name, files in (dirs or {}).items():
        (tmp_path / "scripts" / name).mkdir()
        for filename, text in files.items():
            (tmp_path / "scripts" / name / filename).write_text(text)
    return str(tmp_path)


def test_bad_catalogues_are_one_line_errors(tmp_path):
    with pytest.raises(catalogue.CatalogueError, match="no models.json at its root"):
        catalogue.Catalogue(str(tmp_path))
    (tmp_path / "models.json").write_text("{not json")
    with pytest.raises(catalogue.CatalogueError, match="not valid JSON"):
        catalogue.Catalogue(str(tmp_path))
    root = make(tmp_path, [{"name": "a", "args": ""}], {"both": {"models.json": "[]", "get_models_json.py": ""}})
    with pytest.raises(catalogue.CatalogueError, match="holds both models.json and get_models_json.py"):
        catalogue.Catalogue(root)


def test_a_get_models_json_returning_other_objects_or_nothing_callable_is_refused(tmp_path):
    root = make(tmp_path, [], {"dyn": {"get_models_json.py": "def list_models():\n    return [{'name': 'x'}]\n"}})
    with pytest.raises(catalogue.CatalogueError, match="returned 'dict'; use or subclass"):
        catalogue.Catalogue(root)
    (tmp_path / "scripts" / "dyn" / "get_models_json.py").write_text("X = 1\n")
    with pytest.raises(catalogue.CatalogueError, match="defines no list_models"):
        catalogue.Catalogue(root)
    (tmp_path / "scripts" / "dyn" / "get_models_json.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(catalogue.CatalogueError, match="RuntimeError: boom"):
        catalogue.Catalogue(root)


def test_the_older_madengine_import_name_and_comma_string_tags_work(tmp_path):
    code = ("from madengine.tools.discover_models import CustomModel\n"
            "def list_models():\n    return [CustomModel(name='m', scripts='run.sh', tags='a, b')]\n")
    root = make(tmp_path, [{"name": "r", "tags": "b,c", "args": ""}], {"dyn": {"get_models_json.py": code}})
    assert names(["b"], root) == ["r", "dyn/m"]
    assert names(["dyn/a"], root) == ["dyn/m"]


@pytest.mark.parametrize("requested, model, expected", [
    (-1, None, 7200), (-1, 360, 360), (-1, -1, 7200), (-1, 0, 7200),  # the model's value only when > 0
    (0, 360, None),  # 0: no limit, never overridden
    (5, 360, 5),  # an explicit value wins
    (7200, 360, 360),  # madengine cannot tell an explicit 7200 from the default
])
def test_timeout_follows_madengines_rules(requested, model, expected):
    assert catalogue.resolve_timeout(requested, model) == expected


def test_describe_lists_what_a_run_uses():
    (model,) = catalogue.Catalogue(DUMMY).select(["dummy_sleep:x=1"])
    assert catalogue.describe(model, -1) == {
        "name": "dummy_sleep", "args": "300 --x 1", "scripts": "scripts/dummy/run_sleep.sh", "dockerfile": "docker/dummy",
        "n_gpus": "1", "timeout": 120, "tags": ["dummies"], "multiple_results": ""}


@pytest.mark.parametrize("model", [float("inf"), float("-inf"), float("nan"), True, "nan", "inf"])
def test_a_model_timeout_that_is_not_a_number_of_seconds_leaves_the_default(model):
    assert catalogue.resolve_timeout(-1, model) == 7200


def test_a_directory_model_with_a_non_string_path_or_a_list_models_returning_no_list_is_one_line(tmp_path):
    root = make(tmp_path, [], {"d": {"models.json": json.dumps([{"name": "m", "args": "", "dockerfile": None}])}})
    with pytest.raises(catalogue.CatalogueError, match=r"model m: dockerfile None is not a string path"):
        catalogue.Catalogue(root)
    (tmp_path / "other").mkdir()
    root = make(tmp_path / "other", [], {"dyn": {"get_models_json.py": "def list_models():\n    return 3\n"}})
    with pytest.raises(catalogue.CatalogueError, match="list_models\\(\\) returned int; a list of CustomModel"):
        catalogue.Catalogue(root)

"""ROCm/MAD's own catalogues (tests/fixtures/rocm-mad): every entry read, tags selecting what the file says.

``flat/`` is MAD's root models.json when every model lived there (37 entries); ``split/`` is the later layout
with a short root list and per-directory models.json files whose paths are relative to their directory. Faults
are planted by editing a copy of the real file, one field of one entry at a time.
"""

import copy
import json
import shutil

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._workload import run
from ansible_collections.continuum.hydra.plugins.module_utils._workload.catalogue import Catalogue, CatalogueError, describe
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path

FLAT = fixture_path("rocm-mad", "flat", "models.json")
SPLIT = fixture_path("rocm-mad", "split")
MADENGINE_DUMMY_SCRIPTS = fixture_path("madengine-dummy", "scripts", "dummy")

with open(FLAT) as _handle:
    FLAT_ENTRIES = json.load(_handle)

VLLM_FLAT = [
    "pyt_vllm_llama-3.1-8b", "pyt_vllm_llama-3.1-70b", "pyt_vllm_llama-3.1-405b", "pyt_vllm_llama-3.2-11b-vision-instruct",
    "pyt_vllm_llama-2-7b", "pyt_vllm_llama-2-70b", "pyt_vllm_mixtral-8x7b", "pyt_vllm_mixtral-8x22b", "pyt_vllm_mistral-7b",
    "pyt_vllm_qwen2-7b", "pyt_vllm_qwen2-72b", "pyt_vllm_jais-13b", "pyt_vllm_jais-30b", "pyt_vllm_dbrx-instruct",
    "pyt_vllm_gemma-2-27b", "pyt_vllm_c4ai-command-r-plus-08-2024", "pyt_vllm_deepseek-moe-16b-chat",
    "pyt_vllm_llama-3.1-8b_fp8", "pyt_vllm_llama-3.1-70b_fp8", "pyt_vllm_llama-3.1-405b_fp8", "pyt_vllm_mixtral-8x7b_fp8",
    "pyt_vllm_mixtral-8x22b_fp8", "pyt_vllm_mistral-7b_fp8", "pyt_vllm_dbrx_fp8", "pyt_vllm_command-r-plus_fp8"]
VLLM_SPLIT = ["vllm/pyt_vllm_deepseek-r1", "vllm/pyt_vllm_deepseek-r1_fp4", "vllm/pyt_vllm_deepseek-v3.2",
              "vllm/pyt_vllm_deepseek-v3.2_fp4", "vllm/pyt_vllm_deepseek-v4-flash", "vllm/pyt_vllm_deepseek-v4-pro",
              "vllm/pyt_vllm_gpt-oss-20b"]


def flat_catalogue(tmp_path, entries=None):
    """A MAD checkout's layout around the flat models.json (or an edited copy of its entries)."""
    root = tmp_path / "mad"
    (root / "scripts").mkdir(parents=True)
    if entries is None:
        shutil.copy(FLAT, str(root / "models.json"))
    else:
        (root / "models.json").write_text(json.dumps(entries))
    return root


def names(cat, tags):
    return [model["name"] for model in cat.select(tags)]


def test_every_entry_of_the_flat_catalogue_is_read_in_file_order(tmp_path):
    cat = Catalogue(str(flat_catalogue(tmp_path)))
    assert len(FLAT_ENTRIES) == 37
    assert cat.names() == [entry["name"] for entry in FLAT_ENTRIES]
    assert names(cat, ["all"]) == cat.names()


@pytest.mark.parametrize("tags, expected", [
    (["vllm"], VLLM_FLAT),
    (["pyt"], [entry["name"] for entry in FLAT_ENTRIES if entry["name"] != "dummy_multi"]),  # all but the dummy
    (["pretrain"], ["pyt_megatron_lm_train_llama-2-7b", "pyt_megatron_lm_train_llama-2-70b",
                    "pyt_megatron_lm_train_llama-3.1-8b", "pyt_megatron_lm_train_llama-3.1-70b",
                    "pyt_megatron_lm_train_deepseek-v2-lite-16b"]),
    (["llama2"], ["pyt_megatron_lm_train_llama-2-7b", "pyt_megatron_lm_train_llama-2-70b"]),  # megatron only: vllm's lack it
    (["gpt2,bert"], ["pyt_huggingface_gpt2", "pyt_huggingface_bert"]),
    (["fp16"], ["pyt_huggingface_gpt2"]),  # a tag, not the datatype in the vllm models' args
    (["dummies"], ["dummy_multi"]),
    (["pyt_train_flux"], ["pyt_train_flux"]),
])
def test_tags_select_what_the_flat_file_says(tmp_path, tags, expected):
    assert names(Catalogue(str(flat_catalogue(tmp_path))), tags) == expected


@pytest.mark.parametrize("tag", ["llama", "pyt_vllm", "vllm/all", "Pyt"])
def test_a_tag_no_entry_carries_selects_nothing_in_the_flat_file(tmp_path, tag):
    with pytest.raises(CatalogueError, match="No models found corresponding to the given tag: %s$" % tag):
        Catalogue(str(flat_catalogue(tmp_path))).select([tag])


def test_the_flat_files_fields_are_described_as_a_run_uses_them(tmp_path):
    cat = Catalogue(str(flat_catalogue(tmp_path)))
    described = {model["name"]: describe(model, -1) for model in cat.select(["all"])}
    assert {d["n_gpus"] for name, d in described.items() if name != "dummy_multi"} == {"-1"}
    assert described["dummy_multi"]["n_gpus"] == "1"
    # "timeout": -1 is madengine's "use the default" (7200 s); the huggingface entries have no timeout at all.
    assert {d["timeout"] for d in described.values()} == {7200}
    assert describe(cat.select(["pyt_vllm_llama-3.1-8b"])[0], 0)["timeout"] is None
    assert described["pyt_vllm_llama-3.1-405b_fp8"] == {
        "name": "pyt_vllm_llama-3.1-405b_fp8",
        "args": "--model_repo amd/Llama-3.1-405B-Instruct-FP8-KV --test_option latency,throughput --num_gpu 8 "
                "--datatype float8 --tunableop off",
        "scripts": "scripts/vllm/run.sh", "dockerfile": "docker/pyt_vllm", "n_gpus": "-1", "timeout": 7200,
        "tags": ["pyt", "vllm"], "multiple_results": "perf_Llama-3.1-405B-Instruct-FP8-KV.csv"}
    assert described["pyt_huggingface_bert"]["multiple_results"] == ""
    assert sum(1 for d in described.values() if d["multiple_results"]) == 35
    (model,) = cat.select(["pyt_vllm_qwen2-7b:num_gpu=2:enforce-eager"])
    assert model["args"].endswith("--num_gpu 1 --datatype float16 --tunableop off --num_gpu 2 --enforce-eager")


def test_the_split_layout_rewrites_directory_relative_paths(tmp_path):
    cat = Catalogue(SPLIT)
    assert cat.names()[:2] == ["pyt_huggingface_gpt2", "pyt_huggingface_bert"]
    assert sorted(cat.names()[2:]) == sorted(["dummy/dummy_multi"] + VLLM_SPLIT)  # directory order is os.listdir's
    by_name = {model["name"]: model for model in cat.select(["all"])}
    assert by_name["vllm/pyt_vllm_gpt-oss-20b"]["dockerfile"] == "docker/pyt_vllm"  # "../../docker/pyt_vllm"
    assert by_name["vllm/pyt_vllm_gpt-oss-20b"]["scripts"] == "scripts/vllm/run.sh"
    assert (by_name["dummy/dummy_multi"]["dockerfile"], by_name["dummy/dummy_multi"]["scripts"]) == (
        "docker/dummy", "scripts/dummy/run_multi.sh")
    # skip_gpu_arch is kept as written (a string naming one architecture) on exactly the MXFP4 entries.
    assert {name: m["skip_gpu_arch"] for name, m in by_name.items() if "skip_gpu_arch" in m} == {
        "vllm/pyt_vllm_deepseek-r1_fp4": "gfx942", "vllm/pyt_vllm_deepseek-v3.2_fp4": "gfx942"}


@pytest.mark.parametrize("tags, expected", [
    (["vllm_default"], VLLM_SPLIT[:6]),
    (["vllm_extended"], ["vllm/pyt_vllm_gpt-oss-20b"]),
    (["vllm/vllm_extended"], ["vllm/pyt_vllm_gpt-oss-20b"]),
    (["inference"], VLLM_SPLIT),
    (["vllm/all"], VLLM_SPLIT),
    (["vllm/pyt_vllm_deepseek-r1"], ["vllm/pyt_vllm_deepseek-r1"]),  # the full name; the bare name is no model here
    (["pyt"], ["pyt_huggingface_gpt2", "pyt_huggingface_bert"] + VLLM_SPLIT),
    (["dummies"], ["dummy/dummy_multi"]),
])
def test_tags_select_what_the_split_files_say(tags, expected):
    assert names(Catalogue(SPLIT), tags) == expected


def test_the_bare_name_of_a_directory_model_selects_nothing():
    with pytest.raises(CatalogueError, match="given tag: pyt_vllm_deepseek-r1$"):
        Catalogue(SPLIT).select(["pyt_vllm_deepseek-r1"])


@pytest.mark.parametrize("layout", ["flat", "split"])
def test_mads_dummy_multi_entry_runs_and_its_csv_gives_one_row_per_line(tmp_path, layout):
    if layout == "flat":
        root = flat_catalogue(tmp_path)
    else:
        root = tmp_path / "mad"
        shutil.copytree(SPLIT, str(root))
    script_dir = root / "scripts" / "dummy"
    script_dir.mkdir(exist_ok=True)
    shutil.copy(MADENGINE_DUMMY_SCRIPTS + "/run_multi.sh", str(script_dir / "run_multi.sh"))
    selected = Catalogue(str(root)).select(["dummies"])
    devices = tmp_path / "no-pci"
    devices.mkdir()
    rows = run.Runner(str(root), devices_dir=str(devices), sample_interval_s=0.2, gpu_telemetry=False,
                      gpus=1).run_all(selected)["workloads"]
    name = selected[0]["name"]
    assert [(r["name"], r["status"], r["metric"]) for r in rows] == [
        ("%s_%d" % (name, i), "SUCCESS", "samples_per_sec") for i in range(1, 5)]
    assert all(r["performance"].isdigit() and r["extra"].get("temperature", "").isdigit() for r in rows)


# One field of one real entry edited at a time: the whole catalogue is refused in one line naming the entry and
# the field, as a directory entry's bad path always was (madengine itself would crash on these, mid-selection).
@pytest.mark.parametrize("index, field, value, message", [
    (6, "args", None, r"model pyt_vllm_llama-2-7b: args None is not a string"),
    (6, "args", ["--model_repo", "x"], r"model pyt_vllm_llama-2-7b: args \['--model_repo', 'x'\] is not a string"),
    (0, "scripts", ["scripts/huggingface_gpt2/run.sh"], r"model pyt_huggingface_gpt2: scripts \[.*\] is not a string path"),
    (2, "dockerfile", None, r"model pyt_vllm_llama-3.1-8b: dockerfile None is not a string path"),
    (36, "multiple_results", True, r"model dummy_multi: multiple_results True is not a file name"),
    (31, "tags", None, r"model pyt_megatron_lm_train_llama-2-7b: tags None is not a list of strings"),
    (31, "tags", ["pyt", 7], r"model pyt_megatron_lm_train_llama-2-7b: tags \['pyt', 7\] is not a list of strings"),
    (4, "name", "", r"entry 5: name '' is not a model name"),
    (4, "name", 405, r"entry 5: name 405 is not a model name"),
])
def test_a_real_entry_with_one_bad_field_is_refused_naming_the_entry_and_the_field(tmp_path, index, field, value,
                                                                                   message):
    entries = copy.deepcopy(FLAT_ENTRIES)
    entries[index][field] = value
    root = flat_catalogue(tmp_path, entries)
    with pytest.raises(CatalogueError, match=message) as caught:
        Catalogue(str(root))
    assert "\n" not in str(caught.value) and str(caught.value).startswith(str(root / "models.json") + ": ")


def test_an_entry_without_a_name_or_not_an_object_is_named_by_its_position(tmp_path):
    entries = copy.deepcopy(FLAT_ENTRIES)
    del entries[9]["name"]
    with pytest.raises(CatalogueError, match=r"models.json: entry 10 has no name \(each model needs a string name\)$"):
        Catalogue(str(flat_catalogue(tmp_path, entries)))
    entries = copy.deepcopy(FLAT_ENTRIES)
    entries[3] = "pyt_vllm_llama-3.1-405b"
    with pytest.raises(CatalogueError, match=r"models.json: entry 4 is a string, not a model object$"):
        Catalogue(str(flat_catalogue(tmp_path / "b", entries)))
    with pytest.raises(CatalogueError, match=r"models.json: must be a JSON list of model objects, not an object$"):
        Catalogue(str(flat_catalogue(tmp_path / "c", {"models": FLAT_ENTRIES})))


def test_fields_madengine_reads_loosely_still_read(tmp_path):
    # n_gpus as a number, timeout as a string of seconds or null, tags as a comma string, skip_gpu_arch as a list:
    # each is read (the runner judges n_gpus per model; an unreadable timeout leaves the default).
    entries = copy.deepcopy(FLAT_ENTRIES)
    entries[2].update(n_gpus=8, timeout="3600")
    entries[3].update(timeout=None, tags="pyt, vllm, big")
    entries[4].update(skip_gpu_arch=["gfx90a", "gfx942"], n_gpus="all")
    cat = Catalogue(str(flat_catalogue(tmp_path, entries)))
    first, second, third = (describe(model, -1) for model in cat.select(["vllm"])[:3])
    assert (first["n_gpus"], first["timeout"]) == ("8", 3600)
    assert (second["timeout"], second["tags"]) == (7200, ["pyt", "vllm", "big"])
    assert names(cat, ["big"]) == ["pyt_vllm_llama-3.1-70b"]
    assert third["n_gpus"] == "all"

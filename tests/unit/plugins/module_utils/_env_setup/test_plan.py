"""env_setup's pure logic: option checks, pip command lines, plans, the CPU-only torch rule, state files.

pip's messages and install report are replayed from recordings (tests/fixtures/pip).
"""

import json

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._env_setup import plan as logic
from ansible_collections.continuum.hydra.plugins.module_utils._env_setup.plan import EnvSetupError
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

GPU = "NVIDIA GPU at PCI 0000:01:00.0"


def options(**overrides):
    base = dict(venv="/opt/venv", python=None, numpy_spec="numpy", with_torch=False, torch_spec="torch",
                torch_index=None, requirements=None, upgrade=False, base_dir=None, allow_cpu_torch=False, pip_timeout=60)
    base.update(overrides)
    return base


@pytest.mark.parametrize("spec", [
    "numpy", "numpy>=1.26,<3", "numpy >= 1.26, < 3", "torch==2.5.*", "torch==2.13.0+cpu", "torch[opt-einsum]==2.5.1",
    "typing_extensions~=4.0", "numpy===1.26.4", "zope.interface!=5.0", 'numpy<2; python_version < "3.10"',
])
def test_valid_specs_pass(spec):
    logic.validate_options(options(numpy_spec=spec, with_torch=True, torch_spec=spec))


@pytest.mark.parametrize("spec", [
    "numpy>>=1", "", "numpy ==", "numpy 1.26", "numpy==1.0 --upgrade", "-r /etc/passwd", "--index-url=http://x",
    "numpy=1.0", "-numpy", "numpy,", "numpy @ https://example.invalid/numpy.whl",
])
def test_invalid_specs_fail_naming_the_spec(spec):
    with pytest.raises(EnvSetupError) as exc:
        logic.validate_options(options(numpy_spec=spec))
    assert str(exc.value) == ("numpy_spec %r is not a valid requirement: expected NAME[extras] with optional version "
                              "specifiers, for example 'numpy>=1.26,<3' or 'torch==2.13.0'" % spec)


def test_torch_spec_is_only_judged_with_torch():
    logic.validate_options(options(torch_spec="torch>>=2"))
    with pytest.raises(EnvSetupError, match=r"^torch_spec 'torch>>=2' is not a valid requirement"):
        logic.validate_options(options(with_torch=True, torch_spec="torch>>=2"))


@pytest.mark.parametrize("overrides, message", [
    (dict(venv="venv"), "venv 'venv' must be an absolute path"),
    (dict(base_dir="state"), "base_dir 'state' must be an absolute path"),
    (dict(requirements="requirements.txt"), "requirements 'requirements.txt' must be an absolute path"),
    (dict(with_torch=True, torch_index="wheels.example/cu124"), "torch_index 'wheels.example/cu124' is not an http://, https:// or file:// URL"),
    (dict(with_torch=True, torch_index="ftp://wheels.example/"), "torch_index 'ftp://wheels.example/' is not an http://, https:// or file:// URL"),
    (dict(torch_index="https://wheels.example/cu124"),
     "torch_index 'https://wheels.example/cu124' is set but with_torch is false: set with_torch=true or drop torch_index"),
    (dict(pip_timeout=-5), "pip_timeout -5 must be a positive number of seconds"),
])
def test_bad_options_fail_with_one_line_naming_the_value(overrides, message):
    with pytest.raises(EnvSetupError) as exc:
        logic.validate_options(options(**overrides))
    assert str(exc.value) == message


def test_torch_joins_the_main_resolver_run_without_an_index():
    steps = logic.build_steps(options(with_torch=True, torch_spec="torch==2.13.0", requirements="/r.txt"))
    assert len(steps) == 1
    assert logic.describe_step(steps[0]) == "numpy_spec 'numpy', torch_spec 'torch==2.13.0', requirements '/r.txt'"
    argv = logic.pip_install_argv("/v/bin/python", steps[0], upgrade=True)
    assert argv == ["/v/bin/python", "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                    "--progress-bar", "off", "--upgrade", "--requirement", "/r.txt", "numpy", "torch==2.13.0"]


def test_a_torch_index_makes_torch_a_separate_last_step():
    steps = logic.build_steps(options(with_torch=True, torch_index="https://wheels.example/cu124"))
    assert [step["name"] for step in steps] == ["packages", "torch"]
    assert steps[0]["specs"] == ["numpy"] and steps[1]["specs"] == ["torch"]
    argv = logic.pip_install_argv("/v/bin/python", steps[1], upgrade=False, report_path="/tmp/r.json", ignore_installed=True)
    assert argv[-6:] == ["--report", "/tmp/r.json", "--ignore-installed", "--index-url", "https://wheels.example/cu124", "torch"]
    assert "--dry-run" in argv
    assert logic.describe_step(steps[1]) == "torch_spec 'torch', torch_index 'https://wheels.example/cu124'"


@pytest.mark.parametrize("recording, reason", [
    ("no-matching-distribution.stderr", "No matching distribution found for hydra-no-such-package-xyz"),
    ("conflict.stderr", "Cannot install six==1.16.0 and six==1.17.0 because these package versions have conflicting dependencies."),
    ("missing-requirements.stderr", "Could not open requirements file: [Errno 2] No such file or directory: '/tmp/missing-req.txt'"),
])
def test_pip_failures_come_down_to_their_telling_line(recording, reason):
    assert logic.summarize_pip_failure("", read_fixture("pip", recording)) == reason


def test_pip_output_keeps_the_end_of_long_streams():
    out = logic.pip_output(["pip"], 1, "x" * 5000 + "END", "")
    assert len(out["stdout"]) == logic.OUTPUT_TAIL_CHARS and out["stdout"].endswith("END")


def test_the_recorded_install_report_lists_torch_and_its_dependencies():
    planned = logic.parse_install_report(read_fixture("pip", "report-torch-2.13.0-cpu.json"))
    by_name = dict((logic.canonical_name(item["name"]), item) for item in planned)
    assert by_name["torch"]["version"] == "2.13.0+cpu"
    assert {"sympy", "networkx", "jinja2", "markupsafe", "filelock", "typing-extensions"} <= set(by_name)
    torch = by_name["torch"]
    assert logic.torch_build_from_metadata(torch["version"], torch["metadata"]) == "cpu"


def test_a_wheel_without_label_is_cuda_when_it_needs_nvidia_runtime_wheels():
    # The recorded CPU wheel's metadata with the label dropped and one NVIDIA dependency planted,
    # as PyPI's Linux CUDA wheels carry it.
    planned = logic.parse_install_report(read_fixture("pip", "report-torch-2.13.0-cpu.json"))
    metadata = [item for item in planned if item["name"] == "torch"][0]["metadata"]
    assert logic.torch_build_from_metadata("2.13.0", metadata) is None
    planted = dict(metadata, requires_dist=metadata["requires_dist"] + ['nvidia_cuda_runtime_cu12==12.8.90; platform_system == "Linux"'])
    assert logic.torch_build_from_metadata("2.13.0", planted) == "cuda"
    assert logic.torch_build_from_metadata("2.5.1+cu124", {}) == "cuda"
    assert logic.torch_build_from_metadata("2.5.1+rocm6.2", {}) == "cpu"


def test_a_bad_report_or_list_is_one_clear_error():
    with pytest.raises(EnvSetupError, match="pip's install report is not the JSON it documents"):
        logic.parse_install_report('{"version": "1"}')
    with pytest.raises(EnvSetupError, match="pip list printed something that is not its JSON package list"):
        logic.parse_pip_list("Usage: pip list")


def test_changes_name_each_action_and_match_names_the_pep503_way():
    before = [{"name": "typing_extensions", "version": "4.15.0"}, {"name": "six", "version": "1.17.0"},
              {"name": "numpy", "version": "2.9.0"}, {"name": "torch", "version": "2.13.0"}, {"name": "old", "version": "1"}]
    after = [{"name": "typing-extensions", "version": "4.16.0"}, {"name": "six", "version": "1.16.0"},
             {"name": "numpy", "version": "2.10.0"}, {"name": "torch", "version": "2.13.0+cpu"}, {"name": "new", "version": "0.1"}]
    assert logic.diff_packages(before, after) == [
        {"name": "new", "before": None, "after": "0.1", "action": "install"},
        {"name": "numpy", "before": "2.9.0", "after": "2.10.0", "action": "upgrade"},
        {"name": "old", "before": "1", "after": None, "action": "remove"},
        {"name": "six", "before": "1.17.0", "after": "1.16.0", "action": "downgrade"},
        {"name": "torch", "before": "2.13.0", "after": "2.13.0+cpu", "action": "change"},
        {"name": "typing-extensions", "before": "4.15.0", "after": "4.16.0", "action": "upgrade"},
    ]
    assert logic.diff_packages(after, after) == []
    assert logic.diff_packages([{"name": "a", "version": "1.0"}], [{"name": "a", "version": "1.0.0"}])[0]["action"] == "change"


def test_predicted_packages_take_the_later_step():
    installed = [{"name": "six", "version": "1.16.0"}, {"name": "pip", "version": "23.2.1"}]
    planned = [{"name": "six", "version": "1.17.0"}, {"name": "Torch", "version": "2.13.0+cpu"}, {"name": "torch", "version": "2.5.1"}]
    assert logic.predict_packages(installed, planned) == [
        {"name": "pip", "version": "23.2.1"}, {"name": "six", "version": "1.17.0"}, {"name": "torch", "version": "2.5.1"}]


def test_predicted_freeze_keeps_what_freeze_leaves_out_and_sorts_like_it():
    # A recorded `pip freeze` of a torch virtualenv; pip and setuptools are installed but not printed.
    freeze = ["filelock==4.2.11", "fsspec==2026.9.0", "Jinja2==3.1.6", "MarkupSafe==3.0.4", "mpmath==1.3.0",
              "networkx==3.6.1", "sympy==1.14.0", "torch==2.13.0+cpu", "typing_extensions==4.16.0"]
    installed = [dict(zip(("name", "version"), line.split("=="))) for line in freeze]
    installed += [{"name": "pip", "version": "23.2.1"}, {"name": "setuptools", "version": "84.2.1"}]
    planned = [{"name": "numpy", "version": "2.4.6"}, {"name": "Jinja2", "version": "3.1.5"}, {"name": "setuptools", "version": "85.0.0"}]
    after = logic.predict_packages(installed, planned)
    assert logic.predict_freeze(freeze, installed, after) == [
        "filelock==4.2.11", "fsspec==2026.9.0", "Jinja2==3.1.5", "MarkupSafe==3.0.4", "mpmath==1.3.0", "networkx==3.6.1",
        "numpy==2.4.6", "sympy==1.14.0", "torch==2.13.0+cpu", "typing_extensions==4.16.0"]
    assert logic.predict_freeze(freeze, installed, installed) == freeze


@pytest.mark.parametrize("gpu, torch, allow, expected", [
    (None, {"version": "2.13.0+cpu", "cuda": None, "build": "cpu"}, False, None),
    (GPU, None, False, None),
    (GPU, {"version": "2.5.1+cu124", "cuda": "12.4", "build": "cuda"}, False, None),
    (GPU, {"version": "2.13.0+cpu", "cuda": None, "build": "cpu"}, True, None),
    (GPU, {"version": "2.13.0+cpu", "cuda": None, "build": "cpu"}, False,
     "torch 2.13.0+cpu in /opt/venv is a CPU-only build (torch.version.cuda is None) but this host has an NVIDIA GPU "
     "(NVIDIA GPU at PCI 0000:01:00.0); install a CUDA build (set torch_index to a CUDA wheel index) or set allow_cpu_torch=true"),
    (GPU, {"version": "2.13.0+cpu", "cuda": None, "build": "cpu", "predicted": True}, False,
     "torch 2.13.0+cpu in /opt/venv would be a CPU-only build (torch.version.cuda is None) but this host has an NVIDIA GPU "
     "(NVIDIA GPU at PCI 0000:01:00.0); install a CUDA build (set torch_index to a CUDA wheel index) or set allow_cpu_torch=true"),
    (GPU, {"version": "2.5.1", "cuda": None, "build": None, "predicted": True}, False, None),
    (GPU, {"version": None, "cuda": None, "build": None, "error": "OSError: libcudart.so.12: cannot open shared object file"}, False,
     "torch in /opt/venv cannot be imported (OSError: libcudart.so.12: cannot open shared object file), so it cannot be shown "
     "to be a CUDA build on this host with an NVIDIA GPU (NVIDIA GPU at PCI 0000:01:00.0); install a CUDA build (set "
     "torch_index to a CUDA wheel index) or set allow_cpu_torch=true"),
])
def test_the_cpu_only_torch_rule(gpu, torch, allow, expected):
    assert logic.cpu_torch_problem(gpu, torch, "/opt/venv", allow) == expected


def _manifest(**env):
    snapshot = {"hostname": "gpu-node-01", "venv": "/opt/train/.venv", "python_version": "3.11.7",
                "python_implementation": "CPython", "python_executable": "/opt/train/.venv/bin/python",
                "platform": "Linux-6.1.0-18-amd64-x86_64-with-glibc2.36", "machine": "x86_64", "nvidia_gpu": GPU,
                "torch": {"version": "2.5.1+cu124", "cuda": "12.4", "build": "cuda"}}
    snapshot.update(env)
    packages = [{"name": "torch", "version": "2.5.1+cu124"}, {"name": "Jinja2", "version": "3.1.6"}, {"name": "numpy", "version": "2.1.3"}]
    return logic.build_manifest(snapshot, packages, {"numpy_spec": "numpy"}, "2026-11-22T13:00:00+00:00")


def test_the_manifest_sorts_packages_and_ignores_only_its_timestamp_when_compared():
    manifest = _manifest()
    assert [p["name"] for p in manifest["packages"]] == ["Jinja2", "numpy", "torch"]
    assert manifest["schema_version"] == logic.MANIFEST_SCHEMA_VERSION and manifest["kind"] == "continuum.hydra.env_manifest"
    later = dict(manifest, generated_at="2026-11-23T00:00:00+00:00")
    assert logic.same_manifest(manifest, later)
    assert not logic.same_manifest(manifest, _manifest(platform="Linux-6.1.0-19-amd64-x86_64-with-glibc2.36"))
    assert not logic.same_manifest(None, manifest) and not logic.same_manifest(["not", "a", "manifest"], manifest)
    assert json.loads(logic.render_manifest(manifest)) == manifest


def test_requirements_are_the_freeze_lines_under_a_comment():
    text = logic.render_requirements(["numpy==2.1.3", "six==1.17.0"], "/opt/train/.venv")
    lines = text.splitlines()
    assert lines[0].startswith("# Pinned by continuum.hydra.env_setup from the virtualenv /opt/train/.venv")
    assert lines[1:] == ["numpy==2.1.3", "six==1.17.0"] and text.endswith("\n")


def test_the_readme_says_how_to_replay_with_the_torch_index():
    paths = {"manifest": "/opt/train/.continuum/state/env_manifest.json", "requirements": "/opt/train/.continuum/state/requirements.txt"}
    readme = logic.render_readme(_manifest(), paths, "https://wheels.example/cu124")
    assert "python3.11 -m venv NEW_VENV\n" in readme
    assert ("NEW_VENV/bin/python -m pip install --extra-index-url https://wheels.example/cu124 "
            "-r /opt/train/.continuum/state/requirements.txt\n") in readme
    assert "- torch: 2.5.1+cu124 (CUDA 12.4)\n" in readme and "- numpy: 2.1.3\n" in readme
    plain = logic.render_readme(_manifest(torch=None), paths, None)
    assert "NEW_VENV/bin/python -m pip install -r /opt/train/.continuum/state/requirements.txt\n" in plain
    assert "- torch: not installed\n" in plain and "index" not in plain

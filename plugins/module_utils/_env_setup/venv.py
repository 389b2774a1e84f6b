# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""env_setup on the host: the virtualenv, pip, the torch probe and the state files.

setup() is the whole flow; the decisions are the pure functions of _env_setup.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import json
import os
import platform
import shutil
import socket
import ssl
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional
from urllib.error import HTTPError, URLError
from urllib.parse import unquote, urlparse

from ansible.module_utils.urls import SSLValidationError, open_url

from ansible_collections.continuum.hydra.plugins.module_utils import _atomic
from ansible_collections.continuum.hydra.plugins.module_utils._env_setup import plan as logic
from ansible_collections.continuum.hydra.plugins.module_utils._env_setup.plan import EnvSetupError
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError, run
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_json_or_none, read_text_or_none
from ansible_collections.continuum.hydra.plugins.module_utils._host.pci import scan_nvidia_functions

# Quick questions (pip list, pip freeze, the Python snapshot, the index probe) get a fixed limit;
# pip_timeout bounds the installs, which may download gigabytes.
QUERY_TIMEOUT = 120
INDEX_TIMEOUT = 30

# Run by the virtualenv's own Python (-I: the module's working directory must not shadow packages).
_SNAPSHOT_SCRIPT = r"""
import json, platform, sys
info = {"python_version": platform.python_version(), "python_implementation": platform.python_implementation(),
        "python_executable": sys.executable, "platform": platform.platform(), "machine": platform.machine(),
        "torch": None}
if sys.argv[1:] == ["torch"]:
    try:
        import torch
        cuda = torch.version.cuda
        info["torch"] = {"version": torch.__version__, "cuda": cuda, "build": "cuda" if cuda else "cpu"}
    except Exception as exc:
        info["torch"] = {"version": None, "cuda": None, "build": None, "error": "%s: %s" % (type(exc).__name__, exc)}
sys.stdout.write("\n" + json.dumps(info) + "\n")
"""


def setup(options: Mapping[str, Any], check_mode: bool = False, sysfs_root: str = "/sys",
          search_path: Optional[str] = None) -> dict[str, Any]:
    """Bring the virtualenv to the specs and write the state files; in check mode, only say what would change.

    Returns the module result. Raises EnvSetupError with a one-line message and the result so far.
    search_path is the PATH searched for nvidia-smi (None: the environment's).
    """
    options = logic.validate_options(dict(options))
    venv = os.path.normpath(options["venv"])
    state_dir = os.path.join(options["base_dir"] or venv, *logic.STATE_SUBDIR)
    paths = {
        "manifest": os.path.join(state_dir, logic.MANIFEST_NAME),
        "requirements": os.path.join(state_dir, logic.REQUIREMENTS_NAME),
        "readme": os.path.join(state_dir, logic.README_NAME),
    }
    requirements = options["requirements"]
    if requirements and not os.path.isfile(requirements):
        raise EnvSetupError("requirements %r does not exist or is not a file" % requirements)
    # A bad interpreter is reported even when the virtualenv exists and it would not be used.
    base_python = resolve_python(options["python"])
    venv_exists = _is_venv(venv)
    if options["torch_index"]:
        check_index_reachable(options["torch_index"], INDEX_TIMEOUT)

    gpu = detect_nvidia_gpu(sysfs_root, search_path)
    ctx: dict[str, Any] = {
        "options": options, "venv": venv, "venv_python": os.path.join(venv, "bin", "python"), "paths": paths,
        "steps": logic.build_steps(options), "gpu": gpu,
        "result": {
            "changed": False, "venv": venv, "venv_created": False, "changes": [], "state_files": paths,
            "written": [], "manifest": None, "torch": None, "nvidia_gpu": gpu, "pip_commands": [], "warnings": [],
        },
    }
    try:
        return _plan(ctx, venv_exists, base_python) if check_mode else _apply(ctx, venv_exists, base_python)
    except EnvSetupError as exc:
        # Whatever failed, the result still says what was done before (a created venv, changed packages).
        exc.result = dict(ctx["result"], **exc.result)
        raise


def _apply(ctx: dict[str, Any], venv_exists: bool, base_python: str) -> dict[str, Any]:
    options, result, venv_python = ctx["options"], ctx["result"], ctx["venv_python"]
    timeout = options["pip_timeout"]
    if not venv_exists:
        create_venv(base_python, ctx["venv"], timeout)
        result["venv_created"] = result["changed"] = True
    before = list_packages(venv_python)
    for step in ctx["steps"]:
        argv = logic.pip_install_argv(venv_python, step, options["upgrade"])
        result["pip_commands"].append(argv)
        try:
            _run_pip_step(argv, step, timeout)
        except EnvSetupError:
            # pip may have changed some packages before it failed: the result says which.
            try:
                _record_changes(result, before, list_packages(venv_python))
            except EnvSetupError:
                result["changed"] = True  # cannot tell what pip did, so assume it did something
            raise
    after = list_packages(venv_python)
    _record_changes(result, before, after)
    snapshot = _snapshot(ctx, after)
    manifest, contents = _render_state(ctx, after, snapshot, freeze(venv_python))
    result.update(manifest=manifest, written=_differing(ctx["paths"], contents), torch=snapshot["torch"])
    _write_state(ctx["paths"], contents, result["written"])
    result["changed"] = result["changed"] or bool(result["written"])
    _enforce_cuda_torch(ctx, result["torch"])
    return result


def _plan(ctx: dict[str, Any], venv_exists: bool, base_python: str) -> dict[str, Any]:
    """Check mode: pip's own dry run says exactly what it would install; nothing is written."""
    result = ctx["result"]
    if venv_exists:
        installed = list_packages(ctx["venv_python"])
        pip_python, ignore_installed = ctx["venv_python"], False
    else:
        # No virtualenv yet: ask the interpreter that would create it what a fresh one would get.
        installed = []
        pip_python, ignore_installed = base_python, True
        result["venv_created"] = True
    planned = _dry_run(ctx, pip_python, ignore_installed)
    after = logic.predict_packages(installed, planned)
    _record_changes(result, installed, after)

    if venv_exists:
        snapshot, freeze_now = _snapshot(ctx, installed), freeze(ctx["venv_python"])
        result["manifest"] = _render_state(ctx, installed, snapshot, freeze_now)[0]  # the environment as it is now
        result["torch"] = _predict_torch(result, snapshot["torch"], planned)
        # The files as the real run would render them, from the predicted packages.
        predicted = dict(snapshot, torch=result["torch"])
        contents = _render_state(ctx, after, predicted, logic.predict_freeze(freeze_now, installed, after))[1]
        result["written"] = _differing(ctx["paths"], contents)
    else:
        result["torch"] = _predict_torch(result, None, planned)
        result["written"] = sorted(ctx["paths"].values())
    result["changed"] = bool(result["venv_created"] or result["changes"] or result["written"])
    _enforce_cuda_torch(ctx, result["torch"])
    return result


def _dry_run(ctx: dict[str, Any], pip_python: str, ignore_installed: bool) -> list[dict[str, Any]]:
    """Every step through pip install --dry-run --report: the packages pip would install, later steps last."""
    options, result = ctx["options"], ctx["result"]
    planned: list[dict[str, Any]] = []
    scratch = tempfile.mkdtemp(prefix="hydra-env-setup-")
    try:
        for number, step in enumerate(ctx["steps"]):
            report = os.path.join(scratch, "report-%d.json" % number)
            argv = logic.pip_install_argv(pip_python, step, options["upgrade"], report_path=report,
                                          ignore_installed=ignore_installed)
            result["pip_commands"].append(argv)
            _run_pip_step(argv, step, options["pip_timeout"], dry_run=True)
            with open(report) as handle:
                planned.extend(logic.parse_install_report(handle.read()))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return planned


def _predict_torch(result: dict[str, Any], torch_now: Optional[dict[str, Any]], planned: Sequence[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The torch the run would leave: the installed one, or what the wheel pip would install tells."""
    if not any(logic.canonical_name(change["name"]) == "torch" for change in result["changes"]):
        return torch_now
    wheels = [item for item in planned if logic.canonical_name(item["name"]) == "torch"]
    if not wheels:
        return None  # torch would be removed
    wheel = wheels[-1]
    build = logic.torch_build_from_metadata(wheel["version"], wheel["metadata"])
    if build is None:
        result["warnings"].append("cannot tell before installing whether torch %s is a CUDA build" % wheel["version"])
    return {"version": wheel["version"], "cuda": None, "build": build, "predicted": True}


def _record_changes(result: dict[str, Any], before: Iterable[dict[str, Any]], after: Iterable[dict[str, Any]]) -> None:
    result["changes"] = logic.diff_packages(before, after)
    result["diff"] = {"before": logic.pinned_text(before), "after": logic.pinned_text(after)}
    result["changed"] = result["changed"] or bool(result["changes"])


def _enforce_cuda_torch(ctx: dict[str, Any], torch_info: Optional[dict[str, Any]]) -> None:
    problem = logic.cpu_torch_problem(ctx["gpu"], torch_info, ctx["venv"], ctx["options"]["allow_cpu_torch"])
    if problem:
        raise EnvSetupError(problem)


def _run_pip_step(argv: list[str], step: dict[str, Any], timeout: float, dry_run: bool = False) -> None:
    """Run one pip install; EnvSetupError naming the step's values, with pip's output, when it fails."""
    what = "pip install%s of %s" % (" --dry-run" if dry_run else "", logic.describe_step(step))
    try:
        rc, stdout, stderr = run(argv, timeout)
    except (ProbeError, ProbeAbsent) as exc:
        raise EnvSetupError("%s did not finish (pip_timeout=%ss): %s" % (what, timeout, exc),
                            {"pip_output": logic.pip_output(argv, None, "", "")}) from None
    if rc != 0:
        raise EnvSetupError("%s failed (rc=%d): %s" % (what, rc, logic.summarize_pip_failure(stdout, stderr)),
                            {"pip_output": logic.pip_output(argv, rc, stdout, stderr)})


def _snapshot(ctx: dict[str, Any], packages: Iterable[dict[str, Any]]) -> dict[str, Any]:
    has_torch = any(logic.canonical_name(pkg["name"]) == "torch" for pkg in packages)
    snapshot = python_snapshot(ctx["venv_python"], has_torch)
    snapshot.update(hostname=socket.gethostname(), venv=ctx["venv"], nvidia_gpu=ctx["gpu"])
    return snapshot


def _render_state(ctx: dict[str, Any], packages: Iterable[dict[str, Any]], snapshot: dict[str, Any],
                  freeze_lines: Iterable[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The manifest and the three files' contents. A manifest equal but for generated_at is kept as it is."""
    options, paths = ctx["options"], ctx["paths"]
    inputs = dict((key, options[key]) for key in ("numpy_spec", "with_torch", "requirements", "upgrade"))
    inputs.update(torch_spec=options["torch_spec"] if options["with_torch"] else None, torch_index=options["torch_index"])
    generated_at = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    manifest = logic.build_manifest(snapshot, packages, inputs, generated_at)
    existing = read_json_or_none(paths["manifest"])
    if logic.same_manifest(existing, manifest):
        manifest = existing
    return manifest, {
        "manifest": logic.render_manifest(manifest),
        "requirements": logic.render_requirements(freeze_lines, ctx["venv"]),
        "readme": logic.render_readme(manifest, paths, options["torch_index"]),
    }


def _differing(paths: dict[str, str], contents: dict[str, str]) -> list[str]:
    return sorted(paths[key] for key in contents if read_text_or_none(paths[key]) != contents[key])


def _write_state(paths: dict[str, str], contents: dict[str, str], differing: Sequence[str]) -> None:
    if not differing:
        return
    state_dir = os.path.dirname(paths["manifest"])
    try:
        os.makedirs(state_dir, exist_ok=True)
    except OSError as exc:
        raise EnvSetupError("cannot create the state directory %s (base_dir): %s" % (state_dir, exc.strerror or exc)) from None
    for key in sorted(contents):
        if paths[key] in differing:
            write_atomic(paths[key], contents[key])


# ---- the host: interpreters, pip, the GPU, files -------------------------------------------


def resolve_python(python: Optional[str]) -> str:
    """The interpreter that creates the virtualenv: a path, a name on PATH, or (None) the module's own."""
    if not python:
        return sys.executable
    found = python if "/" in python else shutil.which(python)
    if not found or not os.access(found, os.X_OK):
        raise EnvSetupError("python %r was not found or is not executable (give a path or a name on PATH)" % python)
    return found


def _is_venv(venv: str) -> bool:
    """True for a virtualenv, False for a path to create one in; EnvSetupError for anything else there."""
    if os.path.exists(os.path.join(venv, "bin", "python")):
        return True
    if os.path.isdir(venv) and os.listdir(venv):
        raise EnvSetupError("venv %r exists but is not a virtualenv (no bin/python): choose another path or empty it" % venv)
    if os.path.exists(venv) and not os.path.isdir(venv):
        raise EnvSetupError("venv %r exists and is not a directory" % venv)
    return False


def create_venv(python: str, venv: str, timeout: float) -> None:
    argv = [python, "-m", "venv", venv]
    try:
        rc, stdout, stderr = run(argv, timeout)
    except (ProbeError, ProbeAbsent) as exc:
        raise EnvSetupError("creating the virtualenv %s with python %s did not finish: %s" % (venv, python, exc)) from None
    if rc != 0:
        lines = [line for line in (stderr + stdout).splitlines() if line.strip()]
        raise EnvSetupError("creating the virtualenv %s with python %s failed (rc=%d): %s"
                            % (venv, python, rc, lines[-1].strip() if lines else "no output"),
                            {"pip_output": logic.pip_output(argv, rc, stdout, stderr)})


def _query(argv: list[str], timeout: float, what: str) -> str:
    try:
        rc, stdout, stderr = run(argv, timeout)
    except (ProbeError, ProbeAbsent) as exc:
        raise EnvSetupError("%s did not finish: %s" % (what, exc)) from None
    if rc != 0:
        raise EnvSetupError("%s failed (rc=%d): %s" % (what, rc, logic.summarize_pip_failure(stdout, stderr)),
                            {"pip_output": logic.pip_output(argv, rc, stdout, stderr)})
    return stdout


def list_packages(python: str) -> list[dict[str, str]]:
    """Every distribution in the virtualenv, pip and setuptools included: [{name, version}]."""
    argv = [python, "-m", "pip", "list", "--format=json", "--disable-pip-version-check"]
    return logic.parse_pip_list(_query(argv, QUERY_TIMEOUT, "pip list in %s" % python))


def freeze(python: str) -> list[str]:
    argv = [python, "-m", "pip", "freeze", "--disable-pip-version-check"]
    return [line for line in _query(argv, QUERY_TIMEOUT, "pip freeze in %s" % python).splitlines() if line.strip()]


def python_snapshot(python: str, with_torch: bool) -> dict[str, Any]:
    """The virtualenv's Python, platform and (when installed) torch build, asked of that Python itself."""
    argv = [python, "-I", "-c", _SNAPSHOT_SCRIPT] + (["torch"] if with_torch else [])
    stdout = _query(argv, QUERY_TIMEOUT, "the environment snapshot by %s" % python)
    try:
        return json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise EnvSetupError("the environment snapshot by %s printed no JSON: %r" % (python, stdout[-200:])) from None


def detect_nvidia_gpu(sysfs_root: str = "/sys", search_path: Optional[str] = None) -> Optional[str]:
    """What shows this is a Linux host with an NVIDIA GPU (a PCI display function of NVIDIA, or nvidia-smi), or None."""
    if platform.system() != "Linux":
        return None
    try:
        gpus = scan_nvidia_functions(os.path.join(sysfs_root, "bus", "pci", "devices"))["gpus"]
    except OSError:
        gpus = []
    if gpus:
        return "NVIDIA GPU at PCI %s" % gpus[0]["address"]
    smi = shutil.which("nvidia-smi", path=search_path)
    return "nvidia-smi at %s" % smi if smi else None


def check_index_reachable(url: str, timeout: float) -> None:
    """Fail early, naming the URL, when torch_index cannot be reached.

    pip would retry for seconds and then quietly take torch from its other indexes, which is exactly
    the wrong build. Any HTTP answer (even 404 for an index root) or a TLS verdict that pip may judge
    differently (it has its own certificate settings) counts as reachable.
    """
    parsed = urlparse(url)
    if parsed.scheme == "file":
        if not os.path.isdir(unquote(parsed.path)):
            raise EnvSetupError("torch_index %r is unreachable: %s is not a directory" % (url, unquote(parsed.path)))
        return
    try:
        open_url(url, timeout=timeout).close()
    except (HTTPError, SSLValidationError, ssl.SSLError):
        return
    except URLError as exc:
        if isinstance(exc.reason, ssl.SSLError):
            return
        raise EnvSetupError("torch_index %r is unreachable: %s" % (url, exc.reason)) from None
    except socket.timeout:
        raise EnvSetupError("torch_index %r is unreachable: no answer within %ss" % (url, timeout)) from None
    except Exception as exc:  # open_url's ConnectionError, OSError: the index cannot be reached
        raise EnvSetupError("torch_index %r is unreachable: %s" % (url, exc)) from None


def write_atomic(path: str, text: str) -> None:
    """The shared atomic write, with a failure as a one-line EnvSetupError naming the file."""
    try:
        _atomic.write_atomic(path, text)
    except OSError as exc:
        raise EnvSetupError("cannot write %s (base_dir): %s" % (path, exc.strerror or exc)) from None

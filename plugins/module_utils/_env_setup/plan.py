# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""env_setup's pure logic: option checks, pip command lines, change plans, state file contents.

Nothing here touches the machine; venv.py does the I/O and calls these.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.versions import release

MANIFEST_SCHEMA_VERSION = "1.0.0"
MANIFEST_KIND = "continuum.hydra.env_manifest"
STATE_SUBDIR = (".continuum", "state")
MANIFEST_NAME = "env_manifest.json"
REQUIREMENTS_NAME = "requirements.txt"
README_NAME = "README.md"

# How much of pip's output a failed result carries: the end is where pip says what went wrong.
OUTPUT_TAIL_CHARS = 4000

# A PEP 508 requirement without URL: NAME[extras] specifiers ; marker. pip's own parser is lenient
# (pip 23 accepts "numpy>>=1"), so specs are checked here, which also keeps pip options out of argv.
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_EXTRAS = r"\[\s*(?:%s(?:\s*,\s*%s)*)?\s*\]" % (_NAME, _NAME)
_CLAUSE = r"(?:~=|===|==|!=|<=|>=|<|>)\s*[A-Za-z0-9_.*+!-]+"
_SPEC_RE = re.compile(r"^(%s)\s*(?:%s)?\s*(?:%s(?:\s*,\s*%s)*)?\s*(?:;.+)?$" % (_NAME, _EXTRAS, _CLAUSE, _CLAUSE))
_INDEX_RE = re.compile(r"^(?:https?|file)://\S+$")


class EnvSetupError(Exception):
    """A one-line reason the setup could not be done, with what the result should still report."""

    def __init__(self, message: str, result: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.result = result or {}


def canonical_name(name: str) -> str:
    """PEP 503 normalised project name: pip's 'typing_extensions' and 'typing-extensions' are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def validate_options(options: dict[str, Any]) -> dict[str, Any]:
    """Check every option that can be judged without touching the host; return them unchanged.

    Raises EnvSetupError naming the bad value and what is accepted.
    """
    for key in ("venv", "base_dir", "requirements"):
        value = options.get(key)
        if value is not None and not value.startswith("/"):
            raise EnvSetupError("%s %r must be an absolute path" % (key, value))
    specs = [("numpy_spec", options["numpy_spec"])]
    if options["with_torch"]:
        specs.append(("torch_spec", options["torch_spec"]))
    for key, spec in specs:
        if not _SPEC_RE.match(spec or ""):
            raise EnvSetupError(
                "%s %r is not a valid requirement: expected NAME[extras] with optional version specifiers, "
                "for example 'numpy>=1.26,<3' or 'torch==2.13.0'" % (key, spec))
    index = options.get("torch_index")
    if index is not None:
        if not options["with_torch"]:
            raise EnvSetupError("torch_index %r is set but with_torch is false: set with_torch=true or drop torch_index" % index)
        if not _INDEX_RE.match(index):
            raise EnvSetupError("torch_index %r is not an http://, https:// or file:// URL" % index)
    timeout = options["pip_timeout"]
    if timeout <= 0:
        raise EnvSetupError("pip_timeout %r must be a positive number of seconds" % timeout)
    return options


def build_steps(options: dict[str, Any]) -> list[dict[str, Any]]:
    """The pip install calls, in order: [{name, specs, requirements, index_url, inputs}].

    One resolver run installs NumPy, the requirements file and torch together; only a torch index
    splits torch into its own, last call, so the build from that index is the one that stays.
    """
    torch_apart = options["with_torch"] and bool(options["torch_index"])
    main: dict[str, Any] = {"name": "packages", "specs": [options["numpy_spec"]], "requirements": options["requirements"],
                            "index_url": None, "inputs": [("numpy_spec", options["numpy_spec"])]}
    if options["with_torch"] and not torch_apart:
        main["specs"].append(options["torch_spec"])
        main["inputs"].append(("torch_spec", options["torch_spec"]))
    if options["requirements"]:
        main["inputs"].append(("requirements", options["requirements"]))
    if not torch_apart:
        return [main]
    return [main, {"name": "torch", "specs": [options["torch_spec"]], "requirements": None, "index_url": options["torch_index"],
                   "inputs": [("torch_spec", options["torch_spec"]), ("torch_index", options["torch_index"])]}]


def pip_install_argv(python: str, step: dict[str, Any], upgrade: bool, report_path: Optional[str] = None,
                     ignore_installed: bool = False) -> list[str]:
    """pip's argument list for one step; with report_path it is a dry run writing pip's JSON install report."""
    argv = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--progress-bar", "off"]
    if report_path:
        argv += ["--dry-run", "--report", report_path]
    if ignore_installed:
        argv.append("--ignore-installed")
    if upgrade:
        argv.append("--upgrade")
    if step["index_url"]:
        argv += ["--index-url", step["index_url"]]
    if step["requirements"]:
        argv += ["--requirement", step["requirements"]]
    return argv + list(step["specs"])


def describe_step(step: dict[str, Any]) -> str:
    """The values a step installs, for error messages: "numpy_spec 'numpy', requirements '/r.txt'"."""
    return ", ".join("%s %r" % pair for pair in step["inputs"])


def summarize_pip_failure(stdout: str, stderr: str) -> str:
    """pip's reason for failing, on one line: its most telling ERROR line."""
    lines = [line.strip() for line in (stderr + "\n" + stdout).splitlines()]
    errors = [line[len("ERROR:"):].strip() for line in lines if line.startswith("ERROR:")]
    telling = ("No matching distribution", "Cannot install", "Could not open requirements file", "Invalid requirement")
    for error in errors:
        if error.startswith(telling):
            return error
    if errors:
        return errors[0]
    others = [line for line in lines if line]
    return others[-1] if others else "pip printed nothing"


def pip_output(argv: list[str], rc: Optional[int], stdout: str, stderr: str) -> dict[str, Any]:
    """What a failed result carries for diagnosis: the command and the end of each stream."""
    return {"command": argv, "rc": rc, "stdout": stdout[-OUTPUT_TAIL_CHARS:], "stderr": stderr[-OUTPUT_TAIL_CHARS:]}


def parse_pip_list(text: str) -> list[dict[str, str]]:
    """pip list --format=json output -> [{name, version}] sorted by canonical name."""
    try:
        entries = json.loads(text)
        packages = [{"name": entry["name"], "version": entry["version"]} for entry in entries]
    except (ValueError, TypeError, KeyError) as exc:
        raise EnvSetupError("pip list printed something that is not its JSON package list (%s): %r" % (exc, text[:200])) from None
    return sorted(packages, key=lambda pkg: canonical_name(pkg["name"]))


def parse_install_report(text: str) -> list[dict[str, Any]]:
    """pip's --report JSON -> [{name, version, metadata}] of what the step would install."""
    try:
        report = json.loads(text)
        return [{"name": item["metadata"]["name"], "version": item["metadata"]["version"], "metadata": item["metadata"]}
                for item in report["install"]]
    except (ValueError, TypeError, KeyError) as exc:
        raise EnvSetupError("pip's install report is not the JSON it documents (%s)" % exc) from None


def _action(before: Optional[str], after: Optional[str]) -> str:
    if before is None:
        return "install"
    if after is None:
        return "remove"
    old, new = release(before), release(after)
    if old is not None and new is not None and old != new:
        return "upgrade" if new > old else "downgrade"
    return "change"  # same release, other label: 2.13.0 -> 2.13.0+cpu, 1.0rc1 -> 1.0


def diff_packages(before: Iterable[dict[str, Any]], after: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """What changed between two package lists: [{name, before, after, action}] by canonical name."""
    old = dict((canonical_name(pkg["name"]), pkg) for pkg in before)
    new = dict((canonical_name(pkg["name"]), pkg) for pkg in after)
    changes = []
    for key in sorted(set(old) | set(new)):
        was = old.get(key, {}).get("version")
        now = new.get(key, {}).get("version")
        if was != now:
            name = (new.get(key) or old[key])["name"]
            changes.append({"name": name, "before": was, "after": now, "action": _action(was, now)})
    return changes


def predict_packages(installed: Iterable[dict[str, Any]], planned: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The package list after installing `planned` (pip report items, later steps win) over `installed`."""
    result = dict((canonical_name(pkg["name"]), {"name": pkg["name"], "version": pkg["version"]}) for pkg in installed)
    for item in planned:
        result[canonical_name(item["name"])] = {"name": item["name"], "version": item["version"]}
    return [result[key] for key in sorted(result)]


def predict_freeze(freeze_lines: Sequence[str], installed: Iterable[dict[str, Any]], after: Iterable[dict[str, Any]]) -> list[str]:
    """What `pip freeze` would print once `installed` became `after`.

    Unchanged pins stay as they are (a URL install keeps its form); a changed or new package is
    pinned name==version; what freeze leaves out now (pip itself) it leaves out then. pip freeze
    orders by name, case-insensitively. Editable installs (-e lines, with pip's comments) are put
    first, so with them the prediction is exact only when nothing changes.
    """
    if not diff_packages(installed, after):
        return list(freeze_lines)
    others = [line for line in freeze_lines if line.startswith(("#", "-"))]
    frozen = dict((canonical_name(re.split(r"[\s=<>!~;@\[]", line, maxsplit=1)[0]), line) for line in freeze_lines
                  if line.strip() and line not in others)
    was = dict((canonical_name(pkg["name"]), pkg["version"]) for pkg in installed)
    lines = []
    for pkg in after:
        key = canonical_name(pkg["name"])
        if key in was and key not in frozen:
            continue  # freeze leaves it out
        if key in frozen and was.get(key) == pkg["version"]:
            lines.append((pkg["name"].lower(), frozen[key]))
        else:
            lines.append((pkg["name"].lower(), "%s==%s" % (pkg["name"], pkg["version"])))
    return others + [line for _key, line in sorted(lines)]


def pinned_text(packages: Iterable[dict[str, Any]]) -> str:
    """name==version lines: the before/after of diff mode."""
    return "".join("%s==%s\n" % (pkg["name"], pkg["version"]) for pkg in packages)


def torch_build_from_metadata(version: str, metadata: Optional[dict[str, Any]]) -> Optional[str]:
    """Tell from a wheel that is not installed yet whether it is a CUDA build: 'cuda', 'cpu' or None (cannot tell).

    A local label names the build (+cpu, +rocm6.2, +cu128); PyPI's Linux CUDA wheels have no label but
    depend on NVIDIA's nvidia-* runtime wheels.
    """
    label = version.partition("+")[2].lower()
    if label.startswith("cu"):
        return "cuda"
    if label.startswith(("cpu", "rocm", "xpu")):
        return "cpu"
    if any(canonical_name(req).startswith("nvidia-") for req in (metadata or {}).get("requires_dist") or []):
        return "cuda"
    return None


def cpu_torch_problem(gpu_evidence: Optional[str], torch_info: Optional[dict[str, Any]], venv: str, allow_cpu_torch: bool) -> Optional[str]:
    """The CPU-only torch rule: on a host with an NVIDIA GPU, torch must be a CUDA build.

    gpu_evidence: what showed the GPU, or None on hosts without one. torch_info: the manifest's torch
    entry (None when torch is not installed; build None when a dry run cannot tell). Returns the
    one-line failure, or None.
    """
    if not gpu_evidence or not torch_info or allow_cpu_torch:
        return None
    advice = "install a CUDA build (set torch_index to a CUDA wheel index) or set allow_cpu_torch=true"
    if torch_info.get("error"):
        return ("torch in %s cannot be imported (%s), so it cannot be shown to be a CUDA build on this host with an "
                "NVIDIA GPU (%s); %s" % (venv, torch_info["error"], gpu_evidence, advice))
    if torch_info.get("build") == "cpu":
        verb = "would be" if torch_info.get("predicted") else "is"
        return ("torch %s in %s %s a CPU-only build (torch.version.cuda is None) but this host has an NVIDIA GPU (%s); %s"
                % (torch_info.get("version"), venv, verb, gpu_evidence, advice))
    return None


def build_manifest(snapshot: dict[str, Any], packages: Iterable[dict[str, Any]], inputs: dict[str, Any], generated_at: str) -> dict[str, Any]:
    """The env_manifest.json document: the environment, the inputs that built it, every package with its version."""
    return {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "kind": MANIFEST_KIND,
        "generated_at": generated_at,
        "environment": snapshot,
        "inputs": inputs,
        "packages": sorted(({"name": pkg["name"], "version": pkg["version"]} for pkg in packages),
                           key=lambda pkg: canonical_name(pkg["name"])),
    }


def same_manifest(old: Any, new: dict[str, Any]) -> bool:
    """Equal apart from generated_at: such a manifest is left as it is, so an unchanged host reports changed=false."""
    if not isinstance(old, dict):
        return False
    return dict(old, generated_at=None) == dict(new, generated_at=None)


def render_manifest(manifest: dict[str, Any]) -> str:
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def render_requirements(freeze_lines: Iterable[str], venv: str) -> str:
    """requirements.txt: `pip freeze` of the venv, under a comment saying where it came from."""
    header = "# Pinned by continuum.hydra.env_setup from the virtualenv %s (pip freeze); see README.md to replay it.\n" % venv
    return header + "".join(line + "\n" for line in freeze_lines)


def render_readme(manifest: dict[str, Any], paths: dict[str, str], torch_index: Optional[str]) -> str:
    """README.md: what the state directory holds and the commands that rebuild the environment."""
    env = manifest["environment"]
    versions = dict((canonical_name(pkg["name"]), pkg["version"]) for pkg in manifest["packages"])
    torch = env.get("torch") or {}
    if torch.get("version"):
        torch_line = "%s (CUDA %s)" % (torch["version"], torch["cuda"]) if torch.get("cuda") else "%s (CPU-only build)" % torch["version"]
    else:
        torch_line = "not installed"
    python = "python%s" % ".".join(env["python_version"].split(".")[:2])
    index = " --extra-index-url %s" % torch_index if torch_index else ""
    lines = [
        "# Python environment state",
        "",
        "Written by `continuum.hydra.env_setup` for the virtualenv `%s` on `%s`." % (env["venv"], env["hostname"]),
        "The module rewrites these files whenever the environment changes; do not edit them.",
        "",
        "## Files",
        "",
        "- `%s`: the environment (Python, platform, torch build) and every installed package with its version." % MANIFEST_NAME,
        "- `%s`: the pinned package set, as `pip freeze` prints it." % REQUIREMENTS_NAME,
        "",
        "## Snapshot",
        "",
        "- Python: %s (%s)" % (env["python_version"], env["python_executable"]),
        "- Platform: %s" % env["platform"],
        "- Packages: %d" % len(manifest["packages"]),
        "- numpy: %s" % versions.get("numpy", "not installed"),
        "- torch: %s" % torch_line,
        "",
        "## Replay",
        "",
        "Build the same environment elsewhere (same Python minor version and platform)%s:"
        % (", with the index torch came from" if torch_index else ""),
        "",
        "```sh",
        "%s -m venv NEW_VENV" % python,
        "NEW_VENV/bin/python -m pip install%s -r %s" % (index, paths["requirements"]),
        "```",
        "",
        "or run `continuum.hydra.env_setup` again with the inputs recorded in `%s` (`inputs`)." % MANIFEST_NAME,
        "",
    ]
    return "\n".join(lines)

#!/usr/bin/python
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: env_setup
short_description: Reproducible NumPy/PyTorch virtualenvs, with a manifest of what is installed
version_added: 0.1.0
description:
  - Creates the virtualenv O(venv) when it is missing, then installs NumPy (O(numpy_spec)), PyTorch (O(torch_spec),
    when O(with_torch)) and an optional requirements file (O(requirements)) into it with the virtualenv's own pip.
  - Writes, atomically, three state files under O(base_dir)C(/.continuum/state/) - C(env_manifest.json) (the environment
    and every installed package with its version), C(requirements.txt) (the C(pip freeze) pins) and C(README.md)
    (how to replay the environment). A file is only rewritten when its content changes.
  - In check mode nothing is created, installed or written; pip's own dry run (C(pip install --dry-run --report))
    says exactly which packages would be installed, upgraded or downgraded, in RV(changes).
  - On a Linux host with an NVIDIA GPU the task fails when the virtualenv's torch is a CPU-only build
    (C(torch.version.cuda) is C(None)), unless O(allow_cpu_torch). In check mode the build is predicted from the
    wheel that would be installed.
  - Every pip call is an argument list with a timeout (O(pip_timeout)). A bad value fails the task with one line
    naming it; when pip fails, its output is in RV(pip_output).
  - Runs on the target's Python 3.9+ with the standard library alone; the virtualenv needs pip 22.2 or later for
    check mode (C(python -m venv) of Python 3.9+ brings one).
author:
  - continuum.hydra developers (@continuum-hydra)
extends_documentation_fragment:
  - continuum.hydra._attributes
attributes:
  check_mode:
    support: full
    details:
      - Check mode is the dry run - pip resolves the specs without installing and RV(changes) lists what it would
        install; when the virtualenv is missing, the interpreter of O(python) resolves them as for a fresh one.
  diff_mode:
    support: full
    details:
      - The before and after are the virtualenv's pinned package set (C(name==version) lines); in check mode, the
        after is the predicted set.
options:
  venv:
    description:
      - Absolute path of the virtualenv. Created with O(python) when missing (an empty directory counts as missing);
        a non-empty directory without C(bin/python) is an error.
    type: path
    required: true
  python:
    description:
      - Interpreter that creates the virtualenv, a path or a name on E(PATH) (for example V(python3.11)).
      - Only used to create it; an existing virtualenv keeps its interpreter (an interpreter that cannot be found is an
        error even then).
      - Defaults to the Python running the module (C(ansible_python_interpreter)).
    type: str
  numpy_spec:
    description:
      - NumPy requirement, C(NAME[extras]) with optional version specifiers, for example V(numpy>=1.26,<3).
    type: str
    default: numpy
  with_torch:
    description:
      - Install PyTorch from O(torch_spec).
    type: bool
    default: false
  torch_spec:
    description:
      - PyTorch requirement, for example V(torch==2.5.1). Used with O(with_torch).
    type: str
    default: torch
  torch_index:
    description:
      - Package index that PyTorch (and its dependencies) come from, for example a CUDA wheel index.
      - When set, torch is installed in its own pip call after the others, with this index as C(--index-url), so the
        build from this index is the one that stays. Without it, torch is resolved together with the other packages
        from pip's configured indexes.
      - Checked before anything is installed; an index that cannot be reached is an error (pip would otherwise fall
        back to its other indexes and install a different build).
      - Needs O(with_torch).
    type: str
  requirements:
    description:
      - Absolute path of a requirements file on the host, installed in the same pip call as NumPy.
      - List torch in O(torch_spec), not here, when O(torch_index) is set.
    type: path
  upgrade:
    description:
      - Pass C(--upgrade) to pip, so satisfied requirements move to the newest version the specs allow.
    type: bool
    default: false
  base_dir:
    description:
      - Directory under which C(.continuum/state/) holds the state files.
      - Defaults to O(venv) itself, so two virtualenvs never share state files; set it (for example to the project
        directory) to keep the files when the virtualenv is deleted.
    type: path
  allow_cpu_torch:
    description:
      - Accept a CPU-only torch on a Linux host with an NVIDIA GPU (a PCI display function of vendor 0x10de, or C(nvidia-smi)
        on E(PATH)).
    type: bool
    default: false
  pip_timeout:
    description:
      - Seconds each pip install (and the creation of the virtualenv) may take before it is killed and the task fails.
      - Quick queries (C(pip list), C(pip freeze), the environment snapshot) get 120 seconds, the O(torch_index) check 30.
    type: int
    default: 1800
seealso:
  - module: continuum.hydra.doctor
  - plugin: continuum.hydra.fleet_report
    plugin_type: callback
notes:
  - C(docs/env_setup.md) in the collection describes the state files and the fleet report's environment drift.
"""

EXAMPLES = r"""
- name: NumPy and a pinned CUDA PyTorch in the training virtualenv
  continuum.hydra.env_setup:
    venv: /opt/train/.venv
    python: python3.11
    numpy_spec: numpy>=1.26,<3
    with_torch: true
    torch_spec: torch==2.5.1
    torch_index: https://wheels.example.internal/whl/cu124
    requirements: /opt/train/requirements.txt
    base_dir: /opt/train

- name: Show what would change, without changing anything
  continuum.hydra.env_setup:
    venv: /opt/train/.venv
    upgrade: true
  check_mode: true
  register: plan

- name: A CPU-only torch on purpose, on a GPU host
  continuum.hydra.env_setup:
    venv: /opt/cpu-tests/.venv
    with_torch: true
    torch_spec: torch==2.13.0
    allow_cpu_torch: true
"""

RETURN = r"""
venv:
  description: The virtualenv's path.
  returned: always
  type: str
  sample: /opt/train/.venv
venv_created:
  description: Whether the virtualenv was created (in check mode, would be created).
  returned: always
  type: bool
  sample: false
changes:
  description:
    - The packages installed, upgraded, downgraded or removed by this run, by name; in check mode, what pip's dry
      run says would be. C(action) is V(install), V(upgrade), V(downgrade), V(remove), or V(change) (same release,
      other label such as C(+cpu)).
    - When the virtualenv is created, the pip and setuptools that C(python -m venv) puts in it are not listed in
      check mode.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "six", "before": "1.16.0", "after": "1.17.0", "action": "upgrade"}]
manifest:
  description:
    - The content of C(env_manifest.json) - C(schema_version), C(kind) (V(continuum.hydra.env_manifest)),
      C(generated_at) (when the content last changed), C(environment) (C(hostname), C(venv), C(python_version),
      C(python_implementation), C(python_executable), C(platform), C(machine), C(nvidia_gpu), and C(torch) with
      C(version), C(cuda) and C(build) V(cuda)/V(cpu), or C(null) without torch), C(inputs) (the options that
      built it) and C(packages) (every installed distribution with C(name) and C(version), by name).
    - In check mode, the environment as it is now (C(null) when the virtualenv does not exist yet).
    - The P(continuum.hydra.fleet_report#callback) callback compares these across hosts (environment drift).
  returned: success, or failure after the virtualenv was set up
  type: dict
  sample: {"schema_version": "1.0.0", "kind": "continuum.hydra.env_manifest", "generated_at": "2026-11-22T13:00:00+00:00",
           "environment": {"hostname": "gpu-node-01", "venv": "/opt/train/.venv", "python_version": "3.11.7",
                           "python_implementation": "CPython", "python_executable": "/opt/train/.venv/bin/python",
                           "platform": "Linux-6.1.0-18-amd64-x86_64-with-glibc2.36", "machine": "x86_64",
                           "nvidia_gpu": "NVIDIA GPU at PCI 0000:01:00.0",
                           "torch": {"version": "2.5.1+cu124", "cuda": "12.4", "build": "cuda"}},
           "inputs": {"numpy_spec": "numpy", "with_torch": true, "torch_spec": "torch==2.5.1",
                      "torch_index": "https://wheels.example.internal/whl/cu124", "requirements": null, "upgrade": false},
           "packages": [{"name": "numpy", "version": "2.1.3"}, {"name": "torch", "version": "2.5.1+cu124"}]}
torch:
  description:
    - The virtualenv's torch - C(version), C(cuda) (C(torch.version.cuda)) and C(build) (V(cuda), V(cpu)), with
      C(error) when it cannot be imported; C(null) without torch.
    - In check mode, when torch would change, the prediction from the wheel pip would install, with C(predicted)
      true and C(build) C(null) when the wheel does not tell.
  returned: success, or failure after the virtualenv was set up
  type: dict
  sample: {"version": "2.13.0+cpu", "cuda": null, "build": "cpu"}
nvidia_gpu:
  description: What showed an NVIDIA GPU on this Linux host (a PCI device or C(nvidia-smi)), or C(null).
  returned: always
  type: str
  sample: NVIDIA GPU at PCI 0000:01:00.0
state_files:
  description: Paths of the three state files.
  returned: always
  type: dict
  sample: {"manifest": "/opt/train/.continuum/state/env_manifest.json",
           "requirements": "/opt/train/.continuum/state/requirements.txt",
           "readme": "/opt/train/.continuum/state/README.md"}
written:
  description: The state files this run wrote (in check mode, would write), sorted.
  returned: always
  type: list
  elements: str
  sample: ["/opt/train/.continuum/state/env_manifest.json"]
pip_commands:
  description: The argument list of every pip install this run made (in check mode, the dry runs).
  returned: always
  type: list
  elements: list
  sample: [["/opt/train/.venv/bin/python", "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
            "--progress-bar", "off", "numpy"]]
pip_output:
  description: The command that failed (pip, or C(python -m venv)), its exit code and the last 4000 characters of
    its standard output and error.
  returned: when pip or the virtualenv creation failed
  type: dict
  sample: {"command": ["/opt/train/.venv/bin/python", "-m", "pip", "install", "nosuchpkg"], "rc": 1,
           "stdout": "", "stderr": "ERROR: No matching distribution found for nosuchpkg\n"}
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuum.hydra.plugins.module_utils._env_setup.plan import EnvSetupError
from ansible_collections.continuum.hydra.plugins.module_utils._env_setup.venv import setup


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path", required=True),
            python=dict(type="str"),
            numpy_spec=dict(type="str", default="numpy"),
            with_torch=dict(type="bool", default=False),
            torch_spec=dict(type="str", default="torch"),
            torch_index=dict(type="str"),
            requirements=dict(type="path"),
            upgrade=dict(type="bool", default=False),
            base_dir=dict(type="path"),
            allow_cpu_torch=dict(type="bool", default=False),
            pip_timeout=dict(type="int", default=1800),
        ),
        supports_check_mode=True,
    )
    try:
        result = setup(module.params, check_mode=module.check_mode)
    except EnvSetupError as exc:
        module.fail_json(msg=str(exc), **_finish(module, exc.result))
    module.exit_json(**_finish(module, result))


def _finish(module: AnsibleModule, result: dict[str, Any]) -> dict[str, Any]:
    """Turn the setup result into the module's: warnings through Ansible, the diff only when asked."""
    result = dict(result)
    for warning in result.pop("warnings", []):
        module.warn(warning)
    diff = result.pop("diff", None)
    if module._diff and diff is not None:
        result["diff"] = dict(diff, before_header="%s (pinned packages)" % module.params["venv"],
                              after_header="%s (pinned packages)" % module.params["venv"])
    result.setdefault("changed", False)
    return result


if __name__ == "__main__":
    main()

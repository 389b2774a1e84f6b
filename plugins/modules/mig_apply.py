#!/usr/bin/python
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: mig_apply
short_description: Set the MIG mode and GPU instance layout of NVIDIA GPUs
version_added: 0.1.0
description:
  - Reads the MIG mode of every GPU, the GPU instances of those in MIG mode and the running compute processes, then
    changes what differs from O(mode) and O(layout) with C(nvidia-smi -mig) and C(nvidia-smi mig -dci / -dgi / -cgi -C),
    and reads everything back to verify.
  - A layout that differs is replaced whole (compute and GPU instances destroyed, then the wanted GPU instances
    created, each with its default compute instance), which ends whatever ran on them. So the module refuses to
    change a GPU on which compute processes run, and changes nothing at all unless O(confirm=true).
  - A GPU whose new MIG mode waits for a GPU reset or reboot is listed in RV(reset_required_gpus); its layout is
    created by a run after the reset.
  - Usually called by the P(continuum.hydra.mig#role) role; see C(docs/remediation.md).
author:
  - continuum.hydra developers (@continuum-hydra)
extends_documentation_fragment:
  - continuum.hydra._attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the state and returns the steps it would take, without O(confirm); runs no changing command.
  diff_mode:
    support: full
    details:
      - MIG mode and GPU instance profiles of each selected GPU before and after.
options:
  gpus:
    description: GPUs whose MIG mode is set, by index, UUID or PCI bus id. Empty means every GPU.
    type: list
    elements: str
    default: []
  mode:
    description: MIG mode of the selected GPUs.
    type: str
    choices: [enabled, disabled]
    required: true
  layout:
    description:
      - 'GPU instance profiles per GPU, keyed by index, UUID, PCI bus id or V(all), for example
        C({"all": ["3g.40gb", "3g.40gb"]}). A GPU the layout does not name keeps its instances.'
      - Profile names as C(nvidia-smi mig -lgip) prints them without the C(MIG) prefix.
    type: dict
    default: {}
  confirm:
    description: Must be V(true) for any change; a run without it that has changes to make fails and changes nothing.
    type: bool
    default: false
  nvidia_smi_path:
    description: The C(nvidia-smi) binary; looked up on E(PATH) by default.
    type: path
  timeout:
    description: Seconds each C(nvidia-smi) call may take (enabling MIG may reset the GPU).
    type: int
    default: 120
requirements:
  - nvidia-smi of a driver with MIG support (A100, A30, H100, H200 and later), run as root.
seealso:
  - module: continuum.hydra.gpu_settings_apply
"""

EXAMPLES = r"""
- name: Two 3g.40gb instances on every GPU
  continuum.hydra.mig_apply:
    mode: enabled
    layout:
      all: ["3g.40gb", "3g.40gb"]
    confirm: true

- name: MIG off on GPU 3
  continuum.hydra.mig_apply:
    gpus: ["3"]
    mode: disabled
    confirm: true
"""

RETURN = r"""
steps:
  description: The steps taken (in check mode, to be taken), each with GPU, action (V(mode) or V(layout)), before, after
    and the nvidia-smi argument lists.
  returned: always
  type: list
  elements: dict
  sample: [{"index": 0, "uuid": "GPU-513536b6-7d19-9063-b049-1e69664bb298", "action": "layout", "before": [],
            "after": ["3g.40gb", "3g.40gb"], "commands": [["mig", "-i", "0", "-cgi", "3g.40gb,3g.40gb", "-C"]]}]
gpus:
  description: MIG mode and GPU instance profiles per selected GPU, read after the changes (before, in check mode).
  returned: always
  type: dict
  sample: {"gpu0": {"mig_current": "Enabled", "mig_pending": "Enabled", "instances": ["3g.40gb", "3g.40gb"]}}
reset_required_gpus:
  description: GPUs whose MIG mode waits for a GPU reset or reboot ("reset / reboot required").
  returned: always
  type: list
  elements: int
  sample: []
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi_cli import NvidiaSmiCli
from ansible_collections.continuum.hydra.plugins.module_utils._remediate import gpu_settings
from ansible_collections.continuum.hydra.plugins.module_utils._remediate import mig as _mig


class Smi(NvidiaSmiCli):
    """nvidia-smi plus reading MIG modes, running compute apps and GPU instances."""

    def read(self):
        try:
            gpus = _mig.parse_modes(self.call(_mig.mode_query_args()))
            apps = _mig.parse_apps(self.call(_mig.apps_query_args()))
            instances = []
            for gpu in gpus:
                if gpu["mig_current"] == "Enabled":
                    instances += _mig.parse_gpu_instances(
                        self.call(["mig", "-i", str(gpu["index"]), "-lgi"], allowed="No GPU instances found"))
        except gpu_settings.GpuSettingsError as exc:
            self.module.fail_json(msg=str(exc))
        return gpus, apps, instances


def view(gpus, instances):
    return dict(("gpu%d" % g["index"], {"mig_current": g["mig_current"], "mig_pending": g["mig_pending"],
                                        "instances": sorted(i["profile"] for i in instances if i["gpu"] == g["index"])})
                for g in gpus)


def predicted_view(gpus, steps, instances):
    out = view(gpus, instances)
    for step in steps:
        key = "gpu%d" % step["index"]
        if step["action"] == "mode":
            out[key]["mig_pending"] = step["after"]
        else:
            out[key]["instances"] = step["after"]
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpus=dict(type="list", elements="str", default=[]),
            mode=dict(type="str", choices=["enabled", "disabled"], required=True),
            layout=dict(type="dict", default={}),
            confirm=dict(type="bool", default=False),
            nvidia_smi_path=dict(type="path"),
            timeout=dict(type="int", default=120),
        ),
        supports_check_mode=True,
    )
    params = module.params
    smi = Smi(module)
    gpus, apps, instances = smi.read()
    try:
        selected = gpu_settings.select(gpus, params["gpus"])
        steps = _mig.plan(selected, params["mode"], params["layout"], instances, apps)
    except gpu_settings.GpuSettingsError as exc:
        module.fail_json(msg=str(exc))
    before = view(selected, instances)
    if module.check_mode or not steps:
        module.exit_json(changed=bool(steps), steps=steps, gpus=before, reset_required_gpus=_mig.reset_required(selected),
                         diff={"before": before, "after": predicted_view(selected, steps, instances)})
    if not params["confirm"]:
        module.fail_json(msg="mig: %d step(s) to take on GPU(s) %s, but confirm is not true; nothing was changed" % (
            len(steps), ", ".join(sorted(set(str(s["index"]) for s in steps)))), steps=steps)

    for step in [s for s in steps if s["action"] == "mode"]:
        for command in step["commands"]:
            smi.call(command)
    gpus_now, _apps, _instances = smi.read()
    ready = set(g["uuid"] for g in gpus_now if g["mig_current"] == "Enabled")
    done = [s for s in steps if s["action"] == "mode"]
    for step in [s for s in steps if s["action"] == "layout" and s["uuid"] in ready]:
        for command in step["commands"]:
            smi.call(command)
        done.append(step)

    gpus_after, _apps, instances_after = smi.read()
    uuids = set(g["uuid"] for g in selected)
    gpus_after = [g for g in gpus_after if g["uuid"] in uuids]
    after = view(gpus_after, instances_after)
    waiting = _mig.reset_required(gpus_after)
    result = dict(changed=True, steps=done, gpus=after, reset_required_gpus=waiting, diff={"before": before, "after": after})
    problems = _mig.unverified(done, gpus_after, instances_after)
    if problems:
        module.fail_json(msg="mig: changes not verified: %s" % "; ".join("GPU %s %s reads %r" % p for p in problems), **result)
    if waiting:
        module.warn("MIG mode of GPU(s) %s waits for a GPU reset / reboot; run again after it to create the layout"
                    % ", ".join(str(i) for i in waiting))
    module.exit_json(**result)


if __name__ == "__main__":
    main()

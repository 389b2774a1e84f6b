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
  - A GPU whose new MIG mode waits for a GPU reset or reboot is listed in RV(reboot_required_gpus); its layout is
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
reboot_required_gpus:
  description: GPUs whose MIG mode waits for a GPU reset or reboot ("reset / reboot required").
  returned: always
  type: list
  elements: int
  sample: []
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuum.hydra.plugins.module_utils._remediate import apply
from ansible_collections.continuum.hydra.plugins.module_utils._remediate import mig as _mig


def main() -> None:
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
    apply.run(module, _mig.MigWorker)


if __name__ == "__main__":
    main()

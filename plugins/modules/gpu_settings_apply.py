#!/usr/bin/python
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: gpu_settings_apply
short_description: Set NVIDIA GPU persistence mode, power limit, clocks, compute mode and ECC mode
version_added: 0.1.0
description:
  - Reads the settings of every GPU with one C(nvidia-smi --query-gpu) call, changes only what differs from the
    options given (C(nvidia-smi -pm), C(-pl), C(-ac), C(-lgc), C(-c), C(-e), each with C(-i <index>)), then reads the
    settings again and fails if any change did not take.
  - An option left out is left as it is.
  - ECC mode changes take effect at the next GPU reset or reboot. The module compares and sets the pending mode
    and returns RV(reboot_required) while the current mode differs from it.
  - On a host whose GPUs are AMD (no C(nvidia-smi); amd-smi, an AMD GPU on the PCI bus or the amdgpu module), only
    O(power_limit) has a one-to-one equivalent - it is read, set with C(amd-smi set --gpu N --power-cap W) and read
    back the same way; the other settings are left as they are and named in RV(skipped_settings). With no
    O(power_limit) the module skips (RV(skip_reason)). See C(docs/amd.md).
  - Usually called by the P(continuum.hydra.gpu_settings#role) role; see C(docs/remediation.md).
author:
  - continuum.hydra developers (@continuum-hydra)
extends_documentation_fragment:
  - continuum.hydra._attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the settings and returns the changes it would make; runs no setting command.
  diff_mode:
    support: full
    details:
      - The settings of each selected GPU before and after.
options:
  gpus:
    description:
      - The GPUs to configure, each named by index, UUID or PCI bus id. Empty means every GPU.
    type: list
    elements: str
    default: []
  persistence_mode:
    description: Persistence mode on or off.
    type: bool
  power_limit:
    description: Power limit in watts; must lie in the GPU's own range.
    type: float
  application_clocks:
    description: Application clocks in MHz, a supported memory/graphics pair (C(nvidia-smi -q -d SUPPORTED_CLOCKS)).
    type: dict
    suboptions:
      memory:
        description: Memory clock in MHz.
        type: int
        required: true
      graphics:
        description: Graphics clock in MHz.
        type: int
        required: true
  locked_clocks:
    description:
      - Lock the GPU clocks to this range in MHz (C(nvidia-smi -lgc)).
      - Neither nvidia-smi nor NVML reads locked clocks back, so the module keeps what it set in
        O(locked_clocks_record) and compares with that. The record lives in C(/run) by default, which is cleared at
        reboot just as locked clocks are; after a GPU reset or a driver reload, remove the record to set them again.
    type: dict
    suboptions:
      min:
        description: Lowest GPU clock in MHz.
        type: int
        required: true
      max:
        description: Highest GPU clock in MHz.
        type: int
        required: true
  locked_clocks_record:
    description: File in which the locked clocks set by this module are recorded, per GPU UUID.
    type: path
    default: /run/continuum.hydra/locked-clocks.json
  compute_mode:
    description: Compute mode.
    type: str
    choices: [DEFAULT, EXCLUSIVE_PROCESS, PROHIBITED]
  ecc_mode:
    description: ECC on or off (takes effect at the next GPU reset or reboot).
    type: bool
  nvidia_smi_path:
    description: The C(nvidia-smi) binary; looked up on E(PATH) by default.
    type: path
  timeout:
    description: Seconds each C(nvidia-smi) call may take.
    type: int
    default: 60
requirements:
  - nvidia-smi (the NVIDIA driver's utilities), run as root to change settings.
seealso:
  - module: continuum.hydra.doctor
"""

EXAMPLES = r"""
- name: Persistence mode on and a 400 W power limit on every GPU
  continuum.hydra.gpu_settings_apply:
    persistence_mode: true
    power_limit: 400

- name: Exclusive-process compute mode and ECC on, on GPUs 0 and 1 only
  continuum.hydra.gpu_settings_apply:
    gpus: ["0", "1"]
    compute_mode: EXCLUSIVE_PROCESS
    ecc_mode: true
  register: gpu_settings

- name: Say when a reboot is pending
  ansible.builtin.debug:
    msg: "ECC change pending on GPUs {{ gpu_settings.reboot_required_gpus }}: reset the GPUs or reboot"
  when: gpu_settings.reboot_required
"""

RETURN = r"""
changes:
  description: Each change made (in check mode, that would be made), with the GPU, setting, before and after values and
    the nvidia-smi arguments.
  returned: always
  type: list
  elements: dict
  sample: [{"index": 0, "uuid": "GPU-513536b6-7d19-9063-b049-1e69664bb298", "setting": "persistence_mode",
            "before": "Disabled", "after": "Enabled", "args": ["-i", "0", "-pm", "1"]}]
gpus:
  description: The settings of every selected GPU, read after the changes (before them, in check mode).
  returned: always
  type: dict
  sample: {"gpu0": {"persistence_mode": "Enabled", "power_limit": 400.0, "application_clocks": {"memory": 1593,
           "graphics": 1410}, "locked_clocks": null, "compute_mode": "Default",
           "ecc_mode": {"current": "Enabled", "pending": "Enabled"}}}
reboot_required:
  description: True while an ECC mode change waits for a GPU reset or a reboot ("reset / reboot required").
  returned: always
  type: bool
  sample: false
reboot_required_gpus:
  description: Indexes of the GPUs whose ECC mode waits for a reset or reboot.
  returned: always
  type: list
  elements: int
  sample: [0, 1]
vendor:
  description: V(amd) when the GPUs are AMD (only the power limit is managed there).
  returned: on AMD hosts
  type: str
  sample: amd
skipped_settings:
  description: The options given that have no AMD equivalent and were left as they are.
  returned: on AMD hosts
  type: list
  elements: str
  sample: ["persistence_mode", "application_clocks"]
skip_reason:
  description: Why settings were not applied on this host (AMD GPUs, or no nvidia-smi).
  returned: when settings were skipped
  type: str
  sample: "persistence_mode not set: the GPUs are AMD; amd-smi has no equivalent"
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuum.hydra.plugins.module_utils._remediate import apply
from ansible_collections.continuum.hydra.plugins.module_utils._remediate import gpu_settings as _gpu_settings


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            gpus=dict(type="list", elements="str", default=[]),
            persistence_mode=dict(type="bool"),
            power_limit=dict(type="float"),
            application_clocks=dict(type="dict", options=dict(memory=dict(type="int", required=True),
                                                              graphics=dict(type="int", required=True))),
            locked_clocks=dict(type="dict", options=dict(min=dict(type="int", required=True), max=dict(type="int", required=True))),
            locked_clocks_record=dict(type="path", default="/run/continuum.hydra/locked-clocks.json"),
            compute_mode=dict(type="str", choices=sorted(_gpu_settings.COMPUTE_MODES)),
            ecc_mode=dict(type="bool"),
            nvidia_smi_path=dict(type="path"),
            timeout=dict(type="int", default=60),
        ),
        supports_check_mode=True,
    )
    apply.run(module, _gpu_settings.GpuSettingsWorker)


if __name__ == "__main__":
    main()

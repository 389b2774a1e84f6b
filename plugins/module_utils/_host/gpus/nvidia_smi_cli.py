# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""nvidia-smi as the modules that change GPU state call it: a failure fails the module with one line.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host import command
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import find_nvidia_smi


class NvidiaSmiCli:
    """Reads options nvidia_smi_path and timeout from the module; every call goes through command.run."""

    def __init__(self, module: Any) -> None:
        self.module = module
        try:
            self.binary = find_nvidia_smi(module.params["nvidia_smi_path"])
        except (command.ProbeAbsent, command.ProbeError):
            module.fail_json(msg="nvidia-smi: not found (%s); install the NVIDIA driver utilities or set nvidia_smi_path"
                             % (module.params["nvidia_smi_path"] or "not on PATH"))
        self.timeout = module.params["timeout"]

    def call(self, args: list[str], allowed: Optional[str] = None) -> str:
        """Run nvidia-smi; a non-zero rc fails the module unless the output contains `allowed`."""
        argv = [self.binary] + args
        try:
            rc, out, err = command.run(argv, self.timeout)
        except (command.ProbeError, command.ProbeAbsent) as exc:
            self.module.fail_json(msg=str(exc))
        if rc != 0 and not (allowed and allowed in out + err):
            self.module.fail_json(msg="%s failed (rc %d): %s" % (" ".join(argv), rc, " ".join((err or out).split())), rc=rc)
        return out + err if rc != 0 else out

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""MIG mode and GPU instance layout: parse nvidia-smi, plan the commands, verify.

Pure functions, and at the end the MigWorker that the mig_apply module hands to the remediation lifecycle
(apply.run), which runs the commands.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import re
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi_cli import NvidiaSmiCli
from ansible_collections.continuum.hydra.plugins.module_utils._remediate import apply
from ansible_collections.continuum.hydra.plugins.module_utils._remediate.apply import Failure, Worker
from ansible_collections.continuum.hydra.plugins.module_utils._remediate.gpu_settings import GpuSettingsError, parse_csv, query_args, select
from ansible_collections.continuum.hydra.plugins.module_utils._remediate.vendor import skip_on_amd

Gpu = dict[str, Any]  # parse_modes(): {index, uuid, pci_bus_id, mig_current, mig_pending}
Instance = dict[str, Any]  # parse_gpu_instances(): {gpu, profile, profile_id, instance_id, placement}
Step = dict[str, Any]  # plan(): {index, uuid, action, before, after, commands}

MODE_FIELDS = ("index", "uuid", "pci.bus_id", "mig.mode.current", "mig.mode.pending")
MODE_KEYS = ("index", "uuid", "pci_bus_id", "mig_current", "mig_pending")
APP_FIELDS = ("pid", "gpu_uuid", "process_name")
# "|   0  MIG 3g.40gb        9        1          0:3     |"
_GI_ROW = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+:\d+)\s*\|$")
_PROFILE = re.compile(r"^\d+g\.\d+gb(\+me)?$|^\d+c\.\d+g\.\d+gb$")


class MigError(GpuSettingsError):
    """Bad input, or a refusal (processes running, no confirmation): one line."""


def mode_query_args() -> list[str]:
    return query_args(MODE_FIELDS)


def apps_query_args() -> list[str]:
    return ["--query-compute-apps=%s" % ",".join(APP_FIELDS), "--format=csv,noheader"]


def parse_modes(text: str) -> list[Gpu]:
    gpus = parse_csv(text, MODE_KEYS)
    for gpu in gpus:
        gpu["index"] = int(gpu["index"])
    return gpus


def parse_apps(text: str) -> list[dict[str, Any]]:
    return parse_csv(text, ("pid", "gpu_uuid", "process_name"))


def parse_gpu_instances(text: str) -> list[Instance]:
    """`nvidia-smi mig -lgi` table -> [{gpu, profile, profile_id, instance_id, placement}]."""
    if "No GPU instances found" in text:
        return []
    instances = []
    for line in text.splitlines():
        row = _GI_ROW.match(line.strip())
        if row:
            instances.append({"gpu": int(row.group(1)), "profile": row.group(2), "profile_id": int(row.group(3)),
                              "instance_id": int(row.group(4)), "placement": row.group(5)})
    return instances


def validate(mode: str, layout: Optional[dict[str, Any]]) -> None:
    if mode not in ("enabled", "disabled"):
        raise MigError("mode: %r is not one of enabled, disabled" % (mode,))
    if layout and mode == "disabled":
        raise MigError("layout: GPU instances need MIG enabled, but mode is 'disabled'")
    for gpu, profiles in (layout or {}).items():
        if not isinstance(profiles, list):
            raise MigError("layout.%s: %r is not a list of GPU instance profile names" % (gpu, profiles))
        bad = [p for p in profiles if not isinstance(p, str) or not _PROFILE.match(p)]
        if bad:
            raise MigError("layout.%s: %r is not a GPU instance profile name such as 1g.10gb or 3g.40gb "
                           "(nvidia-smi mig -lgip lists them)" % (gpu, bad[0]))


def layout_for(gpu: Gpu, layout: Optional[dict[str, Any]]) -> Optional[list[str]]:
    """The wanted profiles of one GPU (sorted), or None when the layout says nothing about it."""
    layout = layout or {}
    for key in (str(gpu["index"]), gpu["uuid"], gpu["pci_bus_id"], "all"):
        if key in layout:
            return sorted(layout[key])
    return None


def plan(gpus: list[Gpu], mode: str, layout: Optional[dict[str, Any]], instances: list[Instance],
         apps: list[dict[str, Any]]) -> list[Step]:
    """Steps per GPU: [{index, uuid, action, before, after, commands}] with commands as nvidia-smi argument lists.

    A GPU whose mode waits for a reset gets no layout step: instances can only be made once MIG is on.
    """
    validate(mode, layout)
    unknown = [key for key in (layout or {}) if key != "all" and not any(
        key in (str(g["index"]), g["uuid"], g["pci_bus_id"]) for g in gpus)]
    if unknown:
        raise MigError("layout: %r names no selected GPU; selected: %s" % (
            unknown[0], ", ".join(str(g["index"]) for g in gpus) or "none"))
    want = "Enabled" if mode == "enabled" else "Disabled"
    steps = []
    for gpu in gpus:
        index = str(gpu["index"])
        if gpu["mig_current"] is None and gpu["mig_pending"] is None:
            raise MigError("GPU %s (%s) does not support MIG" % (index, gpu["uuid"]))
        if gpu["mig_pending"] != want:
            steps.append({"index": gpu["index"], "uuid": gpu["uuid"], "action": "mode", "before": gpu["mig_pending"],
                          "after": want, "commands": [["-i", index, "-mig", "1" if mode == "enabled" else "0"]]})
        wanted = layout_for(gpu, layout)
        if wanted is None or mode != "enabled":
            continue
        current = sorted(i["profile"] for i in instances if i["gpu"] == gpu["index"])
        if current == wanted:
            continue
        commands = []
        if current:
            commands += [["mig", "-i", index, "-dci"], ["mig", "-i", index, "-dgi"]]
        if wanted:
            commands.append(["mig", "-i", index, "-cgi", ",".join(wanted), "-C"])
        steps.append({"index": gpu["index"], "uuid": gpu["uuid"], "action": "layout", "before": current,
                      "after": wanted, "commands": commands})
    busy = refusals(steps, apps)
    if busy:
        raise MigError("refusing to change MIG on GPUs with running processes: %s; stop them first" % busy)
    return steps


def refusals(steps: list[Step], apps: list[dict[str, Any]]) -> str:
    """Running compute processes on the GPUs the steps would change, as one line ('' when none)."""
    touched = set(s["uuid"] for s in steps)
    running = [a for a in apps if a["gpu_uuid"] in touched]
    return ", ".join("pid %s (%s) on %s" % (a["pid"], a["process_name"], a["gpu_uuid"]) for a in running)


def unverified(steps: list[Step], gpus_after: list[Gpu], instances_after: list[Instance]) -> list[tuple[int, str, Any]]:
    by_uuid = dict((g["uuid"], g) for g in gpus_after)
    problems: list[tuple[int, str, Any]] = []
    for step in steps:
        gpu = by_uuid.get(step["uuid"])
        if gpu is None:
            problems.append((step["index"], step["action"], "GPU no longer listed"))
        elif step["action"] == "mode" and gpu["mig_pending"] != step["after"]:
            problems.append((step["index"], "mode", gpu["mig_pending"]))
        elif step["action"] == "layout":
            read = sorted(i["profile"] for i in instances_after if i["gpu"] == gpu["index"])
            if read != step["after"]:
                problems.append((step["index"], "layout", read))
    return problems


def reboot_required(gpus: list[Gpu]) -> list[int]:
    """GPUs whose MIG mode waits for a GPU reset or reboot."""
    return [g["index"] for g in gpus if g["mig_pending"] is not None and g["mig_pending"] != g["mig_current"]]


# ---- the worker: nvidia-smi, for apply.run ------------------------------------------------------------------

def view(gpus: list[Gpu], instances: list[Instance]) -> dict[str, dict[str, Any]]:
    """MIG mode and instance profiles per GPU, as shown in a diff: {"gpu0": {...}}."""
    return {"gpu%d" % g["index"]: {"mig_current": g["mig_current"], "mig_pending": g["mig_pending"],
                                   "instances": sorted(i["profile"] for i in instances if i["gpu"] == g["index"])}
            for g in gpus}


def predicted(gpus: list[Gpu], steps: list[Step], instances: list[Instance]) -> tuple[list[Gpu], list[Instance]]:
    """GPUs and instances as the steps leave them, for check mode's diff."""
    gpus = [dict(g) for g in gpus]
    by_index = {g["index"]: g for g in gpus}
    for step in steps:
        if step["action"] == "mode":
            by_index[step["index"]]["mig_pending"] = step["after"]
        else:
            instances = [i for i in instances if i["gpu"] != step["index"]] + [
                {"gpu": step["index"], "profile": profile} for profile in step["after"]]
    return gpus, instances


class MigWorker(Worker):
    """State: {"gpus": the selected GPUs' modes, "apps": running compute apps, "instances": GPU instances}."""

    name = "mig"
    errors = (GpuSettingsError,)

    def __init__(self, module: Any) -> None:
        super().__init__(module)
        skip_on_amd(module, "mig", self.params["nvidia_smi_path"])
        self.smi = NvidiaSmiCli(module)

    def read_all(self) -> dict[str, Any]:
        """Every GPU's MIG mode, the running compute apps and the GPU instances of the GPUs in MIG mode."""
        gpus = parse_modes(self.smi.call(mode_query_args()))
        apps = parse_apps(self.smi.call(apps_query_args()))
        instances: list[Instance] = []
        for gpu in gpus:
            if gpu["mig_current"] == "Enabled":
                instances += parse_gpu_instances(
                    self.smi.call(["mig", "-i", str(gpu["index"]), "-lgi"], allowed="No GPU instances found"))
        return {"gpus": gpus, "apps": apps, "instances": instances}

    def read(self) -> dict[str, Any]:
        state = self.read_all()
        return dict(state, gpus=select(state["gpus"], self.params["gpus"]))

    def plan(self, before: dict[str, Any]) -> list[Step]:
        return plan(before["gpus"], self.params["mode"], self.params["layout"], before["instances"], before["apps"])

    def confirm(self, plan: list[Step]) -> None:
        if not self.params["confirm"]:
            raise Failure("mig: %d step(s) to take on GPU(s) %s, but confirm is not true; nothing was changed" % (
                len(plan), ", ".join(sorted({str(s["index"]) for s in plan}))), steps=plan)

    def apply(self, plan: list[Step]) -> list[Step]:
        """Mode plan first; layout plan then on the GPUs whose MIG mode is on without waiting for a reset."""
        done = [s for s in plan if s["action"] == "mode"]
        for step in done:
            for command in step["commands"]:
                self.smi.call(command)
        ready = {g["uuid"] for g in self.read_all()["gpus"] if g["mig_current"] == "Enabled"}
        for step in [s for s in plan if s["action"] == "layout" and s["uuid"] in ready]:
            for command in step["commands"]:
                self.smi.call(command)
            done.append(step)
        return done

    def read_back(self, before: dict[str, Any]) -> dict[str, Any]:
        state = self.read_all()
        uuids = {g["uuid"] for g in before["gpus"]}
        return dict(state, gpus=[g for g in state["gpus"] if g["uuid"] in uuids])

    def predict(self, before: dict[str, Any], plan: list[Step]) -> dict[str, Any]:
        gpus, instances = predicted(before["gpus"], plan, before["instances"])
        return dict(before, gpus=gpus, instances=instances)

    def verify(self, done: list[Step], after: dict[str, Any]) -> list[str]:
        return ["GPU %s %s reads %r" % problem for problem in unverified(done, after["gpus"], after["instances"])]

    def view(self, state: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return view(state["gpus"], state["instances"])

    def result(self, plan: list[Step], before: dict[str, Any], after: dict[str, Any], applied: bool) -> dict[str, Any]:
        state = after if applied else before
        return {"steps": plan, "gpus": self.view(state), "reboot_required_gpus": reboot_required(state["gpus"])}

    def warnings(self, done: list[Step], after: dict[str, Any]) -> list[str]:
        waiting = reboot_required(after["gpus"])
        if not waiting:
            return []
        return ["MIG mode of GPU(s) %s waits for a GPU reset / reboot; run again after it to create the layout"
                % ", ".join(str(i) for i in waiting)]


# A GPU's steps at most: its mode, then a layout's -dci, -dgi and one -cgi ... -C.
_CALLS_PER_GPU = 4


def deadline_s(call_timeout_s: float, gpus: int, host_gpus: int) -> float:
    """The most a run on ``gpus`` of the host's ``host_gpus`` GPUs takes: each read is 2 queries plus one -lgi per GPU
    of the host, apply reads once more between the mode and the layout steps, and each GPU changed takes
    _CALLS_PER_GPU calls."""
    per_read = 2 + max(gpus, host_gpus)
    return apply.deadline_s(MigWorker, call_timeout_s, per_read, gpus * _CALLS_PER_GPU + per_read)

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""MIG mode and GPU instance layout: parse nvidia-smi, plan the commands, verify.

Pure functions; the mig_apply module runs the commands.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import re

from ansible_collections.continuum.hydra.plugins.module_utils._remediate.gpu_settings import GpuSettingsError, parse_csv, query_args

MODE_FIELDS = ("index", "uuid", "pci.bus_id", "mig.mode.current", "mig.mode.pending")
MODE_KEYS = ("index", "uuid", "pci_bus_id", "mig_current", "mig_pending")
APP_FIELDS = ("pid", "gpu_uuid", "process_name")
# "|   0  MIG 3g.40gb        9        1          0:3     |"
_GI_ROW = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+:\d+)\s*\|$")
_PROFILE = re.compile(r"^\d+g\.\d+gb(\+me)?$|^\d+c\.\d+g\.\d+gb$")


class MigError(GpuSettingsError):
    """Bad input, or a refusal (processes running, no confirmation): one line."""


def mode_query_args():
    return query_args(MODE_FIELDS)


def apps_query_args():
    return ["--query-compute-apps=%s" % ",".join(APP_FIELDS), "--format=csv,noheader"]


def parse_modes(text):
    gpus = parse_csv(text, MODE_KEYS)
    for gpu in gpus:
        gpu["index"] = int(gpu["index"])
    return gpus


def parse_apps(text):
    return parse_csv(text, ("pid", "gpu_uuid", "process_name"))


def parse_gpu_instances(text):
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


def validate(mode, layout):
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


def layout_for(gpu, layout):
    """The wanted profiles of one GPU (sorted), or None when the layout says nothing about it."""
    for key in (str(gpu["index"]), gpu["uuid"], gpu["pci_bus_id"], "all"):
        if key in (layout or {}):
            return sorted(layout[key])
    return None


def plan(gpus, mode, layout, instances, apps):
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


def refusals(steps, apps):
    """Running compute processes on the GPUs the steps would change, as one line ('' when none)."""
    touched = set(s["uuid"] for s in steps)
    running = [a for a in apps if a["gpu_uuid"] in touched]
    return ", ".join("pid %s (%s) on %s" % (a["pid"], a["process_name"], a["gpu_uuid"]) for a in running)


def unverified(steps, gpus_after, instances_after):
    by_uuid = dict((g["uuid"], g) for g in gpus_after)
    problems = []
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


def reset_required(gpus):
    """GPUs whose MIG mode waits for a GPU reset or reboot."""
    return [g["index"] for g in gpus if g["mig_pending"] is not None and g["mig_pending"] != g["mig_current"]]

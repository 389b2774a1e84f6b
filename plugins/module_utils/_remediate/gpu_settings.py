# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""GPU settings through nvidia-smi: read the state, plan the commands for what differs, verify.

Pure functions over `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` text, and at the end the
GpuSettingsWorker that the gpu_settings_apply module hands to the remediation lifecycle (apply.run).

On a host whose GPUs are AMD (no nvidia-smi; vendor.amd_host) the one setting with a one-to-one AMD equivalent,
the power cap, goes through amd-smi: read from the amd-smi records (power.limit_w, min_limit_w, max_limit_w),
set with `amd-smi set --gpu N --power-cap W` (whole watts, amdsmi_cli's parser takes a positive int), read back.
The NVIDIA-only settings are skipped with the reason (skip_reason); with no power_limit the module skips.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import json
from collections.abc import Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._atomic import write_atomic
from ansible_collections.continuum.hydra.plugins.module_utils._host import command
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_json_or_none
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import amd_smi
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi import csv_fields
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.nvidia_smi_cli import NvidiaSmiCli
from ansible_collections.continuum.hydra.plugins.module_utils._remediate import apply
from ansible_collections.continuum.hydra.plugins.module_utils._remediate.apply import Failure, Worker
from ansible_collections.continuum.hydra.plugins.module_utils._remediate.vendor import amd_host, skip_on_amd, skip_reason

Row = dict[str, Any]  # one nvidia-smi csv row by key
Gpu = dict[str, Any]  # parse_state(): one GPU's settings
Change = dict[str, Any]  # plan(): {index, uuid, setting, before, after, args}

# (query field, key in our state dict)
QUERY_FIELDS = (
    ("index", "index"),
    ("uuid", "uuid"),
    ("pci.bus_id", "pci_bus_id"),
    ("name", "name"),
    ("persistence_mode", "persistence_mode"),
    ("power.limit", "power_limit"),
    ("power.min_limit", "power_min_limit"),
    ("power.max_limit", "power_max_limit"),
    ("clocks.applications.memory", "application_clock_memory"),
    ("clocks.applications.graphics", "application_clock_graphics"),
    ("compute_mode", "compute_mode"),
    ("ecc.mode.current", "ecc_mode_current"),
    ("ecc.mode.pending", "ecc_mode_pending"),
)
NUMBER_KEYS = ("power_limit", "power_min_limit", "power_max_limit", "application_clock_memory", "application_clock_graphics")

# compute_mode as nvidia-smi prints it -> the value `nvidia-smi -c` takes.
COMPUTE_MODES = {"DEFAULT": "Default", "EXCLUSIVE_PROCESS": "Exclusive_Process", "PROHIBITED": "Prohibited"}
COMPUTE_MODE_ARGS = {"DEFAULT": "0", "PROHIBITED": "2", "EXCLUSIVE_PROCESS": "3"}

SETTINGS = ("persistence_mode", "power_limit", "application_clocks", "locked_clocks", "compute_mode", "ecc_mode")


class GpuSettingsError(ValueError):
    """Bad input or unreadable state: one line naming the value and what is accepted."""


def query_args(fields: Sequence[str]) -> list[str]:
    return ["--query-gpu=%s" % ",".join(fields), "--format=csv,noheader,nounits"]


def parse_csv(text: str, keys: Sequence[str]) -> list[Row]:
    """nvidia-smi csv,noheader,nounits rows -> list of dicts (nvidia_smi.csv_fields); absent ('[N/A]', '[Not
    Supported]') and unreadable ('[Unknown Error]') values alike become None."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = csv_fields(line, len(keys))
        if len(values) != len(keys):
            raise GpuSettingsError("nvidia-smi printed %d values where %d were asked for: %r" % (len(values), len(keys), line))
        rows.append(dict((key, value if isinstance(value, str) else None) for key, value in zip(keys, values)))
    return rows


def parse_state(text: str) -> list[Gpu]:
    """The settings of every GPU, numbers as numbers."""
    gpus = parse_csv(text, [key for _field, key in QUERY_FIELDS])
    for gpu in gpus:
        gpu["index"] = int(gpu["index"])
        for key in NUMBER_KEYS:
            if gpu[key] is not None:
                try:
                    gpu[key] = float(gpu[key]) if key.startswith("power") else int(float(gpu[key]))
                except ValueError:
                    raise GpuSettingsError("nvidia-smi printed %s=%r for GPU %d, not a number" % (key, gpu[key], gpu["index"])) from None
    return gpus


def select(gpus: list[Gpu], wanted: Sequence[Any]) -> list[Gpu]:
    """GPUs named by index, UUID or PCI bus id; all GPUs when none is named."""
    if not wanted:
        return list(gpus)
    chosen = []
    for name in wanted:
        text = str(name).strip()
        match = [g for g in gpus if text in (str(g["index"]), g["uuid"], g["pci_bus_id"])]
        if not match:
            raise GpuSettingsError("gpus: %r matches no GPU; this host has %s" % (
                name, ", ".join("%d (%s)" % (g["index"], g["uuid"]) for g in gpus) or "no GPU"))
        if match[0] not in chosen:
            chosen.append(match[0])
    return chosen


def validate(desired: dict[str, Any]) -> None:
    """desired: {setting: value or None}; None means leave as it is."""
    unknown = sorted(set(desired) - set(SETTINGS))
    if unknown:
        raise GpuSettingsError("unknown setting %r; accepted: %s" % (unknown[0], ", ".join(SETTINGS)))
    mode = desired.get("compute_mode")
    if mode is not None and mode not in COMPUTE_MODES:
        raise GpuSettingsError("compute_mode: %r is not one of %s" % (mode, ", ".join(sorted(COMPUTE_MODES))))
    for name, keys in (("application_clocks", ("memory", "graphics")), ("locked_clocks", ("min", "max"))):
        value = desired.get(name)
        if value is None:
            continue
        if not isinstance(value, dict) or sorted(value) != sorted(keys) or not all(
                isinstance(value[k], int) and not isinstance(value[k], bool) and value[k] > 0 for k in keys):
            raise GpuSettingsError("%s: %r must be {%s} in MHz, positive whole numbers" % (name, value, ", ".join("%s: N" % k for k in keys)))
    locked = desired.get("locked_clocks")
    if locked and locked["min"] > locked["max"]:
        raise GpuSettingsError("locked_clocks: min %d MHz is above max %d MHz" % (locked["min"], locked["max"]))
    power = desired.get("power_limit")
    if power is not None and (isinstance(power, bool) or not isinstance(power, (int, float)) or power <= 0):
        raise GpuSettingsError("power_limit: %r is not a positive number of watts" % (power,))


def _on_off(flag: bool) -> str:
    return "Enabled" if flag else "Disabled"


def plan(gpus: list[Gpu], desired: dict[str, Any], locked_record: Optional[dict[str, Any]] = None) -> list[Change]:
    """Changes needed on the given GPUs: [{index, uuid, setting, before, after, args}] (args without the binary).

    locked_record: {uuid: {"min", "max"}} of the locked clocks hydra set earlier, since neither nvidia-smi nor NVML
    reads locked clocks back.
    """
    validate(desired)
    locked_record = locked_record or {}
    changes = []
    for gpu in gpus:
        index = str(gpu["index"])

        def change(setting: str, before: Any, after: Any, args: list[str], gpu: Gpu = gpu) -> None:
            changes.append({"index": gpu["index"], "uuid": gpu["uuid"], "setting": setting,
                            "before": before, "after": after, "args": ["-i", str(gpu["index"])] + args})

        if desired.get("persistence_mode") is not None:
            want = _on_off(desired["persistence_mode"])
            if gpu["persistence_mode"] != want:
                change("persistence_mode", gpu["persistence_mode"], want, ["-pm", "1" if desired["persistence_mode"] else "0"])
        power = desired.get("power_limit")
        if power is not None:
            if gpu["power_limit"] is None:
                raise GpuSettingsError("power_limit: GPU %s does not report a power limit (not supported)" % index)
            check_range(power, index, gpu["power_min_limit"], gpu["power_max_limit"])
            if abs(gpu["power_limit"] - power) > 0.005:
                change("power_limit", gpu["power_limit"], float(power), ["-pl", "%g" % power])
        clocks = desired.get("application_clocks")
        if clocks is not None:
            before = {"memory": gpu["application_clock_memory"], "graphics": gpu["application_clock_graphics"]}
            if before["memory"] is None:
                raise GpuSettingsError("application_clocks: GPU %s does not support application clocks" % index)
            if before != clocks:
                change("application_clocks", before, dict(clocks), ["-ac", "%d,%d" % (clocks["memory"], clocks["graphics"])])
        locked = desired.get("locked_clocks")
        if locked is not None:
            recorded = locked_record.get(gpu["uuid"])
            if recorded != locked:
                change("locked_clocks", recorded, dict(locked), ["-lgc", "%d,%d" % (locked["min"], locked["max"])])
        mode = desired.get("compute_mode")
        if mode is not None and gpu["compute_mode"] != COMPUTE_MODES[mode]:
            change("compute_mode", gpu["compute_mode"], COMPUTE_MODES[mode], ["-c", COMPUTE_MODE_ARGS[mode]])
        if desired.get("ecc_mode") is not None:
            want = _on_off(desired["ecc_mode"])
            if gpu["ecc_mode_pending"] is None:
                raise GpuSettingsError("ecc_mode: GPU %s does not support ECC" % index)
            # The pending mode is what the next reset / reboot brings: that is what a change must set.
            if gpu["ecc_mode_pending"] != want:
                change("ecc_mode", gpu["ecc_mode_pending"], want, ["-e", "1" if desired["ecc_mode"] else "0"])
    return changes


def check_range(power: float, index: str, low: Optional[float], high: Optional[float]) -> None:
    if low is not None and high is not None and not low <= power <= high:
        raise GpuSettingsError("power_limit: %g W is outside GPU %s's range %g-%g W" % (power, index, low, high))


# ---- AMD: the power cap through amd-smi ------------------------------------------------------------------------

def _watts(value: Any) -> Optional[float]:
    """A number of watts from an amd-smi record; absent or unreadable is None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def amd_state(inventory: dict[str, Any]) -> list[Gpu]:
    """amd-smi records (_host/gpus/amd_smi.parse_amd_smi) -> GPU states of parse_state()'s shape, power only."""
    gpus = []
    for record in inventory["gpus"]:
        power = record.get("power") or {}
        gpu: Gpu = dict((key, None) for _field, key in QUERY_FIELDS)
        gpu.update(index=record["index"], uuid=record.get("uuid") or record.get("pci_bus_id") or "gpu%d" % record["index"],
                   pci_bus_id=record.get("pci_bus_id"), name=record.get("name"), power_limit=_watts(power.get("limit_w")),
                   power_min_limit=_watts(power.get("min_limit_w")), power_max_limit=_watts(power.get("max_limit_w")))
        gpus.append(gpu)
    return gpus


def plan_amd(gpus: list[Gpu], desired: dict[str, Any]) -> list[Change]:
    """The power cap changes on AMD GPUs (args for amd-smi); the other settings are not planned (NVIDIA-only)."""
    validate(desired)
    power = desired.get("power_limit")
    if power is None:
        return []
    if float(power) != int(power):
        raise GpuSettingsError("power_limit: %g W is not whole watts; amd-smi --power-cap takes whole watts" % power)
    changes = []
    for gpu in gpus:
        index = str(gpu["index"])
        if gpu["power_limit"] is None:
            raise GpuSettingsError("power_limit: AMD GPU %s does not report a power cap (amd-smi static --json: limit)" % index)
        check_range(power, index, gpu["power_min_limit"], gpu["power_max_limit"])
        if abs(gpu["power_limit"] - power) > 0.005:
            changes.append({"index": gpu["index"], "uuid": gpu["uuid"], "setting": "power_limit", "before": gpu["power_limit"],
                            "after": float(power), "args": ["set", "--gpu", index, "--power-cap", "%d" % power]})
    return changes


def reboot_required(gpus: list[Gpu], desired: dict[str, Any]) -> list[int]:
    """GPUs whose ECC mode waits for a GPU reset or reboot to take effect (pending differs from current)."""
    if desired.get("ecc_mode") is None:
        return []
    return [g["index"] for g in gpus if g["ecc_mode_pending"] is not None and g["ecc_mode_pending"] != g["ecc_mode_current"]]


def unverified(changes: list[Change], gpus_after: list[Gpu], locked_record: Optional[dict[str, Any]] = None) -> list[tuple[int, str, Any]]:
    """Changes the state read afterwards does not show: [(index, setting, what was read)]."""
    by_uuid = dict((g["uuid"], g) for g in gpus_after)
    problems = []
    for entry in changes:
        gpu = by_uuid.get(entry["uuid"])
        if gpu is None:
            problems.append((entry["index"], entry["setting"], "GPU no longer listed"))
            continue
        read = {
            "persistence_mode": gpu["persistence_mode"],
            "power_limit": gpu["power_limit"],
            "application_clocks": {"memory": gpu["application_clock_memory"], "graphics": gpu["application_clock_graphics"]},
            "locked_clocks": (locked_record or {}).get(entry["uuid"]),
            "compute_mode": gpu["compute_mode"],
            "ecc_mode": gpu["ecc_mode_pending"],
        }[entry["setting"]]
        same = abs(read - entry["after"]) <= 0.005 if entry["setting"] == "power_limit" and read is not None else read == entry["after"]
        if not same:
            problems.append((entry["index"], entry["setting"], read))
    return problems


def view(gpus: list[Gpu], locked_record: Optional[dict[str, Any]] = None) -> dict[str, dict[str, Any]]:
    """The settings per GPU, as shown in a diff: {"gpu0": {...}}."""
    out = {}
    for gpu in gpus:
        out["gpu%d" % gpu["index"]] = {
            "persistence_mode": gpu["persistence_mode"],
            "power_limit": gpu["power_limit"],
            "application_clocks": {"memory": gpu["application_clock_memory"], "graphics": gpu["application_clock_graphics"]},
            "locked_clocks": (locked_record or {}).get(gpu["uuid"]),
            "compute_mode": gpu["compute_mode"],
            "ecc_mode": {"current": gpu["ecc_mode_current"], "pending": gpu["ecc_mode_pending"]},
        }
    return out


def predicted(gpus: list[Gpu], changes: list[Change]) -> list[Gpu]:
    """The state after the changes, for check mode's diff."""
    after = [dict(g) for g in gpus]
    by_uuid = dict((g["uuid"], g) for g in after)
    for entry in changes:
        gpu = by_uuid[entry["uuid"]]
        if entry["setting"] == "application_clocks":
            gpu["application_clock_memory"] = entry["after"]["memory"]
            gpu["application_clock_graphics"] = entry["after"]["graphics"]
        elif entry["setting"] == "ecc_mode":
            gpu["ecc_mode_pending"] = entry["after"]
        elif entry["setting"] != "locked_clocks":
            gpu[entry["setting"]] = entry["after"]
    return after


# ---- the worker: nvidia-smi and the locked clocks record, for apply.run -----------------------------------------

def read_record(path: str) -> dict[str, Any]:
    """The locked clocks set earlier; a missing or damaged record only means they are set once more."""
    record = read_json_or_none(path)
    return record if isinstance(record, dict) else {}


def write_record(path: str, record: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(record, sort_keys=True))


class GpuSettingsWorker(Worker):
    """State: {"gpus": the selected GPUs' settings, "record": the locked clocks record}. Plan: the changes."""

    name = "gpu_settings"
    errors = (GpuSettingsError,)

    def __init__(self, module: Any) -> None:
        super().__init__(module)
        self.desired = {name: self.params[name] for name in SETTINGS}
        self.record_path: str = self.params["locked_clocks_record"]
        self.record = read_record(self.record_path)
        self.amd = amd_host(self.params["nvidia_smi_path"])
        if not self.amd or self.desired["power_limit"] is None:
            skip_on_amd(module, "gpu_settings", self.params["nvidia_smi_path"])
            self.amd = None
            self.smi = NvidiaSmiCli(module)
            return
        # AMD GPUs: the power cap through amd-smi, the NVIDIA-only settings skipped with the reason.
        self.skipped = [name for name in SETTINGS if name != "power_limit" and self.desired[name] is not None]
        try:
            self.amd_smi = amd_smi.find_amd_smi()
        except command.ProbeAbsent:
            module.fail_json(msg="amd-smi: not found on PATH; the power cap of AMD GPUs is set with amd-smi (ROCm's amd-smi-lib)")

    def read_gpus(self) -> list[Gpu]:
        if self.amd:
            try:
                return amd_state(amd_smi.read_gpus(self.amd_smi, self.params["timeout"]))
            except (command.ProbeError, command.ProbeAbsent) as exc:
                raise GpuSettingsError(str(exc)) from None
        return parse_state(self.smi.call(query_args([field for field, _key in QUERY_FIELDS])))

    def read(self) -> dict[str, Any]:
        return {"gpus": select(self.read_gpus(), self.params["gpus"]), "record": dict(self.record)}

    def plan(self, before: dict[str, Any]) -> list[Change]:
        if self.amd:
            return plan_amd(before["gpus"], self.desired)
        return plan(before["gpus"], self.desired, before["record"])

    def predict(self, before: dict[str, Any], plan: list[Change]) -> dict[str, Any]:
        record = dict(before["record"])
        record.update((c["uuid"], c["after"]) for c in plan if c["setting"] == "locked_clocks")
        return {"gpus": predicted(before["gpus"], plan), "record": record}

    def apply(self, plan: list[Change]) -> list[Change]:
        if self.amd:
            return self.apply_amd(plan)
        for entry in plan:
            self.smi.call(entry["args"])
            if entry["setting"] == "locked_clocks":
                self.record[entry["uuid"]] = entry["after"]
                try:
                    write_record(self.record_path, self.record)
                except OSError as exc:
                    raise Failure("locked_clocks_record: cannot write %s (%s); the clocks are set, the record is not"
                                  % (self.record_path, exc.strerror or exc), changes=plan) from exc
        return plan

    def apply_amd(self, plan: list[Change]) -> list[Change]:
        done: list[Change] = []
        for entry in plan:
            argv = [self.amd_smi] + entry["args"]
            try:
                rc, out, err = command.run(argv, self.params["timeout"])
            except (command.ProbeError, command.ProbeAbsent) as exc:
                raise Failure("%s: %s" % (" ".join(argv), exc), changes=done) from None
            if rc != 0:
                raise Failure("%s failed (rc %d): %s" % (" ".join(argv), rc, " ".join((err or out).split())), rc=rc, changes=done)
            done.append(entry)
        return done

    def read_back(self, before: dict[str, Any]) -> dict[str, Any]:
        uuids = {g["uuid"] for g in before["gpus"]}
        return {"gpus": [g for g in self.read_gpus() if g["uuid"] in uuids], "record": dict(self.record)}

    def verify(self, done: list[Change], after: dict[str, Any]) -> list[str]:
        return ["GPU %s %s reads %r" % problem for problem in unverified(done, after["gpus"], after["record"])]

    def view(self, state: dict[str, Any]) -> dict[str, dict[str, Any]]:
        if self.amd:
            return dict(("gpu%d" % g["index"], {"power_limit": g["power_limit"]}) for g in state["gpus"])
        return view(state["gpus"], state["record"])

    def result(self, plan: list[Change], before: dict[str, Any], after: dict[str, Any], applied: bool) -> dict[str, Any]:
        pending = reboot_required(after["gpus"], self.desired)
        out = {"changes": plan, "gpus": self.view(after if applied else before), "reboot_required": bool(pending),
               "reboot_required_gpus": pending}
        if self.amd:
            out.update(vendor="amd", skipped_settings=self.skipped)
            if self.skipped:
                out["skip_reason"] = "%s not set: %s" % (", ".join(self.skipped), skip_reason("gpu_settings", self.amd))
        return out


def deadline_s(call_timeout_s: float, gpus: int) -> float:
    """The most a run on ``gpus`` GPUs takes: one query (or one amd-smi read, one timeout for its calls) per read,
    one nvidia-smi call per GPU and setting changed."""
    return apply.deadline_s(GpuSettingsWorker, call_timeout_s, 1, gpus * len(SETTINGS))

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What fleet analysis compares about a host, read from its fleet report entry (pure).

The doctor result's ``environment`` is the first source; check details fill what it lacks
(torch and NCCL versions, per-GPU modes), then the profile summary and the env_setup manifest.
Every reader tolerates missing keys: an unknown fact is None and is never compared.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, READ_FAILED

# check id -> (status, details) of the checks facts are read from
Details = Mapping[str, tuple[Any, dict[str, Any]]]

UNSET = "(unset)"
NOT_INSTALLED = "(not installed)"
NO_GPU = "no GPU"

# Per-GPU configuration: where each value may sit in a GPU record of environment.gpus[] (flat, or nested
# as in the nvidia-smi probe's data), else which doctor check names it in its details.gpus[] and under
# which key. PCIe is the link's maximum generation and width (what slot and card can do): the current
# values drop at idle for power saving, so they would drift all the time.
GPU_FIELD_SOURCES = {
    "vbios_version": ((("vbios_version",),), None),
    "persistence_mode": ((("persistence_mode",),), ("gpu.persistence_mode", "persistence_mode")),
    "ecc_mode": ((("ecc_mode",), ("ecc", "current")), ("gpu.ecc_mode", "current")),
    "mig_mode": ((("mig_mode",), ("mig", "current")), ("gpu.mig", "current")),
    "pcie_gen": ((("pcie_gen_max",), ("pcie", "gen_max")), ("gpu.pcie_link", "target_gen")),
    "pcie_width": ((("pcie_width_max",), ("pcie", "width_max")), ("gpu.pcie_link", "target_width")),
}
MODE_FIELDS = ("persistence_mode", "ecc_mode", "mig_mode")

# The configuration fields drift compares, in report order. gpu_count is judged among the hosts of
# the same GPU model, CPU and memory (classes also split on GPU count).
DRIFT_FIELDS = ("gpu_count", "driver_version", "cuda_driver_version", "rocm_version", "vbios_version", "kernel", "torch_version",
                "nccl_version", "nccl_env", "persistence_mode", "ecc_mode", "mig_mode", "pcie_gen", "pcie_width")
PER_GPU_FIELDS = tuple(f for f in DRIFT_FIELDS if f in GPU_FIELD_SOURCES)
FACT_CHECKS = frozenset(["pytorch.installed", "pytorch.cuda_version", "cuda.torch_cuda_version", "nccl.torch_backend",
                         "nccl.env_config"] + [source[1][0] for source in GPU_FIELD_SOURCES.values() if source[1]])


def _dig(record: Any, path: Iterable[str]) -> Any:
    for key in path:
        if not isinstance(record, dict):
            return None
        record = record.get(key)
    return record


def _first(record: Any, paths: Iterable[Iterable[str]]) -> Any:
    for path in paths:
        value = _dig(record, path)
        if value is not None and value != "":
            return value
    return None


def text(value: object) -> Optional[str]:
    """The comparable text of a fact: integral numbers without a decimal point, strings stripped."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


def _check_details(doctor: Optional[Mapping[str, Any]]) -> dict[str, tuple[Any, dict[str, Any]]]:
    """check id -> (status, details) of the doctor checks facts are read from."""
    out: dict[str, tuple[Any, dict[str, Any]]] = {}
    for chk in (doctor or {}).get("checks") or []:
        if isinstance(chk, dict) and chk.get("id") in FACT_CHECKS:
            details = chk.get("details")
            out[chk["id"]] = (chk.get("status"), details if isinstance(details, dict) else {})
    return out


def _gpus(doctor: Optional[Mapping[str, Any]], profile: Optional[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The host's GPU records: doctor's environment, else the profile's."""
    environment = (doctor or {}).get("environment") or {}
    gpus = [g for g in environment.get("gpus") or [] if isinstance(g, dict)]
    if not gpus and profile:
        gpus = [g for g in profile.get("gpus") or [] if isinstance(g, dict)]
    return gpus


def _detail_values(details: Details, check_id: str, key: str) -> dict[Any, Any]:
    """{uuid or index: value} from one check's details.gpus[] entries."""
    out = {}
    for ref in details.get(check_id, (None, {}))[1].get("gpus") or []:
        if isinstance(ref, dict) and ref.get(key) is not None:
            out[ref.get("uuid") or ref.get("index")] = ref[key]
    return out


def _gpu_values(gpus: Sequence[Mapping[str, Any]], details: Details, field: str) -> tuple[Optional[str], ...]:
    """Each GPU's text value for field (None: not known), in the order of gpus. Values are interned: a fleet's
    GPUs share a handful of values, and the facts of every host are held through the analysis."""
    paths, from_check = GPU_FIELD_SOURCES[field]
    in_check = None
    out = []
    for gpu in gpus:
        value = _first(gpu, paths)
        if value is None and from_check:
            if in_check is None:
                in_check = _detail_values(details, from_check[0], from_check[1])
            value = in_check.get(gpu.get("uuid"), in_check.get(gpu.get("index")))
        value = text(value)
        out.append(None if value is None else sys.intern(value.lower() if field in MODE_FIELDS else value))
    return tuple(out)


def _torch_version(details: Details, env_setup: Optional[Mapping[str, Any]]) -> Optional[str]:
    status, installed = details.get("pytorch.installed", (None, {}))
    if installed.get("version"):
        return installed["version"]
    for check_id, key in (("pytorch.cuda_version", "version"), ("cuda.torch_cuda_version", "torch_version")):
        value = details.get(check_id, (None, {}))[1].get(key)
        if value:
            return value
    torch = _dig(env_setup, ("environment", "torch"))
    if isinstance(torch, dict) and torch.get("version"):
        return torch["version"]
    if status is not None and status != ERROR and installed.get("python"):
        return NOT_INSTALLED
    return None


def _nccl_env(environment: Mapping[str, Any], details: Details) -> Optional[str]:
    settings = environment.get("nccl_settings")
    if settings is None:
        settings = details.get("nccl.env_config", (None, {}))[1].get("settings")
    if not isinstance(settings, dict):
        return None
    if not settings:
        return UNSET
    return " ".join("%s=%s" % (name, (value or {}).get("value") if isinstance(value, dict) else value)
                    for name, value in sorted(settings.items()))


def gpu_model(gpus: Iterable[Mapping[str, Any]]) -> str:
    """The GPU model of a host: its GPUs' name, or the names joined when they differ."""
    names = sorted(set(text(g.get("name")) or "unknown GPU" for g in gpus))
    return " + ".join(names) if names else NO_GPU


def gpu_vendor(gpus: Iterable[Mapping[str, Any]]) -> Optional[str]:
    """The GPU vendor of a host: "amd" or "nvidia" (records without a vendor are nvidia-smi's), joined when mixed."""
    vendors = sorted(set(text(g.get("vendor")) or "nvidia" for g in gpus))
    return " + ".join(vendors) if vendors else None


def host_facts(entry: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """Hardware and configuration facts of one fleet report host entry (None when it has no data at all)."""
    doctor = entry.get("doctor") if isinstance(entry.get("doctor"), dict) else None
    profile = entry.get("profile") if isinstance(entry.get("profile"), dict) else None
    env_setup = entry.get("env_setup") if isinstance(entry.get("env_setup"), dict) else None
    if doctor is None and profile is None:
        return None
    environment = (doctor or {}).get("environment") or {}
    environment = environment if isinstance(environment, dict) else {}
    details = _check_details(doctor)
    gpus = _gpus(doctor, profile)
    memory = environment.get("memory_total_bytes")
    facts: dict[str, Any] = {
        "gpu_model": gpu_model(gpus),
        "gpu_count": len(gpus),
        "gpu_vendor": gpu_vendor(gpus),
        "cpu_model": text(environment.get("cpu_model")),
        "memory_total_bytes": memory if isinstance(memory, (int, float)) and not isinstance(memory, bool) else None,
        "driver_version": text(environment.get("driver_version")),
        "cuda_driver_version": text(environment.get("cuda_driver_version")),
        "rocm_version": text(environment.get("rocm_version")),
        "kernel": text(environment.get("kernel")),
        "torch_version": text(environment.get("torch_version") or _torch_version(details, env_setup)),
        "nccl_version": text(environment.get("nccl_version") or details.get("nccl.torch_backend", (None, {}))[1].get("nccl_version")),
        "nccl_env": _nccl_env(environment, details),
        "gpu_ids": tuple((gpu.get("index"), gpu.get("uuid")) for gpu in gpus),  # what gpu_values' positions are
        "gpu_values": {},
    }
    if not gpus and _dig(doctor, ("probes", "nvidia_smi", "status")) == READ_FAILED:
        # nvidia-smi failed: the GPUs are unknown, not absent.
        facts["gpu_model"] = facts["gpu_count"] = None
    for field in PER_GPU_FIELDS:
        values = facts["gpu_values"][field] = _gpu_values(gpus, details, field)
        distinct = sorted(set(v for v in values if v is not None))
        facts[field] = ", ".join(distinct) if distinct else None
    return facts

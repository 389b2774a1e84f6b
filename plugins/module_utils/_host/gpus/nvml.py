# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""NVML through pynvml (nvidia-ml-py): one bounded session, and the device list it reports.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from typing import Any, Callable, Union

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError, call_with_timeout


def as_text(value: Union[str, bytes]) -> str:
    """pynvml returns bytes on old releases, str on new ones."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def session(work: Callable[[Any], Any], timeout: float) -> tuple[bool, Any]:
    """Import pynvml, init, run work(pynvml), always shut down; the whole session bounded by timeout.

    Returns (True, work's value), or (False, the init error's text) when NVML does not initialise here (no
    driver, or a driver/library mismatch: data, not a read failure). ProbeAbsent when pynvml is not installed;
    ProbeError when a query fails or the session outlives the timeout (a hung GPU).
    """
    try:
        import pynvml  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise ProbeAbsent("pynvml (nvidia-ml-py) is not installed") from None

    def run() -> tuple[bool, Any]:
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            return False, "%s: %s" % (type(exc).__name__, exc)
        try:
            return True, work(pynvml)
        finally:
            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError:
                pass

    try:
        return call_with_timeout(run, timeout, "NVML")
    except pynvml.NVMLError as exc:
        raise ProbeError("NVML query failed: %s: %s" % (type(exc).__name__, exc)) from None


def devices(pynvml: Any) -> dict[str, Any]:
    """Within a session: the driver version and each device's index, name, UUID and PCI bus id."""
    found = []
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        found.append({
            "index": index,
            "name": as_text(pynvml.nvmlDeviceGetName(handle)),
            "uuid": as_text(pynvml.nvmlDeviceGetUUID(handle)),
            "pci_bus_id": as_text(pynvml.nvmlDeviceGetPciInfo(handle).busId),
        })
    return {"driver_version": as_text(pynvml.nvmlSystemGetDriverVersion()), "device_count": len(found), "devices": found}


def nvlinks(pynvml: Any) -> list[dict[str, Any]]:
    """Within a session: each GPU's NVLink links and whether each is active."""
    gpus = []
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        links = []
        for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
            try:
                state = pynvml.nvmlDeviceGetNvLinkState(handle, link)
            except pynvml.NVMLError:
                continue  # not supported, or past this GPU's last link
            links.append({"link": link, "active": state == pynvml.NVML_FEATURE_ENABLED, "speed_gbps": None,
                          "state": "active" if state == pynvml.NVML_FEATURE_ENABLED else "inactive"})
        gpus.append({"index": index, "name": as_text(pynvml.nvmlDeviceGetName(handle)),
                     "uuid": as_text(pynvml.nvmlDeviceGetUUID(handle)), "links": links})
    return gpus

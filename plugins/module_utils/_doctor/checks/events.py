# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Kernel-log events are judged inside their window: each one says when it happened, and one of unknown time never FAILs.

An event latched for good is what users of the anchors report (a 15-hour-old event kept a node "unhealthy":
ROCm device-metrics-exporter #506, #507). The kernel-log checks (gpu.xid_errors, gpu.amdgpu_errors) read only their
window; an event whose line carries no time (busybox dmesg, a line without its stamp) cannot be placed in it, so it is
a WARN at most, saying so.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, WARN

UNDATED = ("its log line carries no time, so it may be older than the window: a WARN, not a FAIL (read the log with "
           "timestamps: journalctl -k, or dmesg --time-format iso)")
# The source that applies the window itself (`journalctl -k --since -<hours>h`): what it returns is inside the window
# even where a line's own stamp cannot be read. dmesg returns the whole boot: hydra cuts it by each line's stamp.
WINDOWED_SOURCE = "journalctl"


def _in_window_undated(log: Mapping[str, Any]) -> bool:
    return bool(log.get("window_applied")) and log.get("source") == WINDOWED_SOURCE


def when(entry: Mapping[str, Any], log: Mapping[str, Any]) -> str:
    """When an event group last happened, for its message."""
    if entry.get("last_seen"):
        return "last at %s" % entry["last_seen"]
    if _in_window_undated(log):
        return "within the last %s h (its time not read)" % log.get("window_hours")
    return "at an unknown time"


def dated(status: str, entry: Mapping[str, Any], log: Mapping[str, Any]) -> tuple[str, Optional[str]]:
    """(status, why it was lowered or None): a FAIL from an event that cannot be placed in the window (no timestamp,
    and a log whose source did not apply the window: dmesg) is a WARN."""
    if status == FAIL and not entry.get("last_seen") and not _in_window_undated(log):
        return WARN, UNDATED
    return status, None

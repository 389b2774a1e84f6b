# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The node-local health check's last result (hydra-healthcheck's last.json), for check slurm.healthcheck.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import json
import time
from collections.abc import Mapping
from typing import Any

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.state import healthcheck_last
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import DEFAULT_COMMAND_TIMEOUT, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text
from ansible_collections.continuum.hydra.plugins.module_utils._status import ERROR, FAIL

EXIT_CODES = (0, 1, 2)


def probe_healthcheck_last(options: Mapping[str, Any]) -> dict[str, Any]:
    """last.json's verdict: ProbeAbsent (checks SKIP) where the program never ran, ProbeError when it is not its JSON.

    The file is ``<options["state_dir"]>/healthcheck/last.json`` (doctor's state_dir, default /var/lib/continuum-hydra),
    where hydra-healthcheck (_doctor/healthcheck.py, the slurm_healthcheck role's slurm_healthcheck_state_dir) writes it.
    """
    path = healthcheck_last(options.get("state_dir"))
    text = read_text(path, (options.get("timeouts") or {}).get("command", DEFAULT_COMMAND_TIMEOUT))
    return parse_last(text, path, time.time())


def parse_last(text: str, path: str, now: float) -> dict[str, Any]:
    """last.json text -> {path, exit_code, at, at_epoch, read_at_epoch, level, mode, node, drained, action, reason,
    why, failing, erroring} (the check ids that were FAIL and ERROR); ProbeError naming what is wrong."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ProbeError("%s: not JSON (%s)" % (path, exc)) from None
    if not isinstance(data, dict) or data.get("exit_code") not in EXIT_CODES or isinstance(data.get("exit_code"), bool):
        raise ProbeError("%s: not a hydra-healthcheck result (no exit_code 0, 1 or 2)" % path)
    checks = [chk for chk in data.get("checks") or [] if isinstance(chk, dict)]
    return {
        "path": path,
        "exit_code": data["exit_code"],
        "at": data.get("at"),
        "at_epoch": _epoch(data.get("at")),
        "read_at_epoch": now,
        "level": data.get("level"),
        "mode": data.get("mode"),
        "node": data.get("node"),
        "drained": bool(data.get("drained")),
        "action": data.get("action"),
        "reason": data.get("reason"),
        "why": data.get("why"),
        "failing": [chk.get("id") for chk in checks if chk.get("status") == FAIL],
        "erroring": [chk.get("id") for chk in checks if chk.get("status") == ERROR],
    }


def _epoch(value: Any) -> Any:
    """An ISO 8601 time with its offset -> seconds since the epoch; None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None

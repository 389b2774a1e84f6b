# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""SLURM node state as scontrol shows it, and the scontrol arguments that drain or resume a node.

Shared by the slurm_gate role (which drains and resumes from the controller) and the node-local health check
(which only drains its own node): both write reasons starting with REASON_PREFIX, and only such drains are
ever resumed by hydra.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import re
from typing import Any, Optional

# Every drain reason hydra writes starts with this; only such drains are ever resumed by hydra.
REASON_PREFIX = "hydra:"
# SLURM stores reasons of any length, but `sinfo -R` shows the start: keep it readable.
MAX_REASON_CHARS = 120

_NODE_NAME = re.compile(r"(?:^|\s)NodeName=(\S+)")
_STATE = re.compile(r"\sState=(\S+)")
# scontrol ends a reason with " [user@time]"; the reason itself may hold spaces and '='.
_REASON = re.compile(r"\sReason=(.*?)(?: \[[^\[\]@]*@[^\[\]]*\])?\s*$")
_NO_REASON = ("", "none", "(null)")

Node = dict[str, Any]  # parse_show_node(): {state, flags, drained, reason}


def parse_show_node(text: str) -> dict[str, Node]:
    """`scontrol show node [NAME] -o` text -> {node: {"state", "flags", "drained", "reason"}}.

    22.05 has no `scontrol --json`; one line per node, with State=BASE+FLAG+FLAG and Reason= last. Lines without
    NodeName= ("Node node9 not found") are not nodes.
    """
    nodes = {}
    for line in text.splitlines():
        name = _NODE_NAME.search(line)
        if not name:
            continue
        state = _STATE.search(line)
        reason = _REASON.search(line)
        parts = (state.group(1) if state else "UNKNOWN").split("+")
        value = reason.group(1).strip() if reason else ""
        nodes[name.group(1)] = {
            "state": "+".join(parts),
            "flags": parts[1:],
            # DRAIN on an idle node, DRAINING/DRAINED in older spellings of the same flag.
            "drained": any(p.startswith("DRAIN") for p in parts),
            "reason": value if value not in _NO_REASON else None,
        }
    return nodes


def is_hydra_reason(reason: Optional[str]) -> bool:
    return reason is not None and reason.startswith(REASON_PREFIX)


def drain_args(node: str, reason: str) -> list[str]:
    """scontrol arguments that drain the node (an argument list: the reason needs no quoting)."""
    return ["update", "nodename=%s" % node, "state=drain", "reason=%s" % reason]


def resume_args(node: str) -> list[str]:
    return ["update", "nodename=%s" % node, "state=resume"]

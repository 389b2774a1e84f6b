"""A stateful stand-in for scontrol, for the slurm_gate Molecule scenario only: the nodes live in a JSON file.

    python3 molecule_fake_scontrol.py seed RECORDING.txt STATE.json   # state from a real `scontrol show node -o`
    MOLECULE_FAKE_SCONTROL_STATE=STATE.json python3 molecule_fake_scontrol.py ARGS...   # behave as `scontrol ARGS...`

`show node [NAME] -o` replays the real recording's lines with each node's State= and Reason= edited from the state;
`update nodename=N state=drain reason=R` and `update nodename=N state=resume` change the state as slurmctld does
(DRAIN flag on / off, reason stamped with [user@time] / cleared). Every call is logged in state["calls"]. Anything
else exits 1 with scontrol's kind of error, so an unexpected call fails the scenario. The pytest role tests
(tests/integration/test_slurm_gate.py) run the gate against real slurmctld/slurmd; this fake only keeps Molecule
cheap.
"""

import json
import os
import re
import sys
import time

_NODE = re.compile(r"^NodeName=(\S+)")
_STATE = re.compile(r"(\sState=)(\S+)")
_REASON = re.compile(r"\sReason=.*$")


def _load(path):
    with open(path) as handle:
        return json.load(handle)


def _save(path, state):
    temp = path + ".tmp"
    with open(temp, "w") as handle:
        json.dump(state, handle, indent=1, sort_keys=True)
    os.replace(temp, path)


def seed(recording, state_path):
    nodes = {}
    with open(recording) as handle:
        for line in handle:
            line = line.rstrip("\n")
            name = _NODE.search(line)
            if not name:
                continue
            reason = re.search(r"\sReason=(.*?) \[[^\]]*\]$", line)
            nodes[name.group(1)] = {"line": _REASON.sub("", line), "state": _STATE.search(line).group(2),
                                    "reason": reason.group(1) if reason else None}
    _save(state_path, {"nodes": nodes, "calls": []})


def show(state, only=None):
    lines = []
    for name in sorted(state["nodes"]) if only is None else [only]:
        node = state["nodes"][name]
        line = _STATE.sub(lambda m, value=node["state"]: m.group(1) + value, node["line"], count=1)
        if node["reason"]:
            line += " Reason=%s [root@%s]" % (node["reason"], node.get("stamp", "2026-11-22T13:19:42"))
        lines.append(line)
    return "\n".join(lines) + "\n"


def update(state, args):
    fields = dict(arg.split("=", 1) for arg in args if "=" in arg)
    name = fields.get("nodename")
    if name not in state["nodes"]:
        raise ValueError("Invalid node name specified")
    node = state["nodes"][name]
    parts = node["state"].split("+")
    wanted = fields.get("state", "").lower()
    if wanted == "drain":
        if not fields.get("reason"):
            raise ValueError("You must specify a reason when DOWNING or DRAINING a node. Request denied")
        node["state"] = "+".join(parts if "DRAIN" in parts else parts + ["DRAIN"])
        node["reason"] = fields["reason"]
        node["stamp"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    elif wanted == "resume":
        if "DRAIN" not in parts:
            raise ValueError("Invalid node state specified")
        node["state"] = "+".join(p for p in parts if p != "DRAIN")
        node["reason"] = None
    else:
        raise ValueError("fake scontrol: unsupported update %r" % (args,))
    return ""


def run(argv, state):
    if argv == ["show", "node", "-o"]:
        return show(state)
    if len(argv) == 4 and argv[:2] == ["show", "node"] and argv[3] == "-o":
        if argv[2] not in state["nodes"]:
            raise ValueError("Node %s not found" % argv[2])
        return show(state, argv[2])
    if argv and argv[0] == "update":
        return update(state, argv[1:])
    raise ValueError("fake scontrol: unsupported arguments %r" % (argv,))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "seed":
        seed(sys.argv[2], sys.argv[3])
        return 0
    path = os.environ.get("MOLECULE_FAKE_SCONTROL_STATE")
    if not path:
        sys.stderr.write("fake scontrol: MOLECULE_FAKE_SCONTROL_STATE is not set\n")
        return 1
    state = _load(path)
    state["calls"].append(sys.argv[1:])
    try:
        out, rc = run(sys.argv[1:], state), 0
    except ValueError as exc:
        out, rc = "scontrol: error: %s\n" % exc, 1
    _save(path, state)
    (sys.stdout if rc == 0 else sys.stderr).write(out)
    return rc


if __name__ == "__main__":
    sys.exit(main())

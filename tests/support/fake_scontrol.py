"""A fake `scontrol` for the node-local health check tests: records every call, answers `show node NAME -o`.

The answer is the node's line from a real recording (tests/fixtures/slurm/, slurm-wlm 22.05.8) with its NodeName,
State= and Reason= set from a JSON state file; `update nodename=N state=drain reason=R` sets the DRAIN flag and
the reason as slurmctld does. Anything else exits 1. The real-daemon tests use the real scontrol.
"""

import json
import os
import sys

from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path

RECORDING = fixture_path("slurm", "scontrol-show-node-22.05-admin-and-hydra-drain.txt")

_SCRIPT = r'''
import json, os, re, sys, time
state_path = %(state)r
with open(state_path) as handle:
    state = json.load(handle)
args = sys.argv[1:]
state["calls"].append(args)
out, rc = "", 0
if len(args) == 4 and args[:2] == ["show", "node"] and args[3] == "-o":
    node = state["nodes"].get(args[2])
    if node is None:
        out, rc = "Node %%s not found\n" %% args[2], 1
    else:
        line = re.sub(r"^NodeName=\S+", "NodeName=" + args[2], state["template"])
        line = re.sub(r"(\sState=)\S+", lambda m: m.group(1) + node["state"], line, count=1)
        if node.get("reason"):
            line += " Reason=%%s [root@2026-11-22T13:19:42]" %% node["reason"]
        out = line + "\n"
elif args[:1] == ["update"]:
    fields = dict(a.split("=", 1) for a in args[1:] if "=" in a)
    node = state["nodes"].get(fields.get("nodename"))
    if node is None or fields.get("state", "").lower() != "drain" or not fields.get("reason"):
        out, rc = "scontrol: error: unsupported update %%r\n" %% (args,), 1
    else:
        parts = node["state"].split("+")
        node["state"] = "+".join(parts if "DRAIN" in parts else parts + ["DRAIN"])
        node["reason"] = fields["reason"]
else:
    out, rc = "scontrol: error: unsupported arguments %%r\n" %% (args,), 1
tmp = state_path + ".tmp"
with open(tmp, "w") as handle:
    json.dump(state, handle)
os.replace(tmp, state_path)
(sys.stdout if rc == 0 else sys.stderr).write(out)
sys.exit(rc)
'''


def _template():
    with open(RECORDING) as handle:
        line = handle.readline().rstrip("\n")
    return line.split(" Reason=", 1)[0]


def write_fake_scontrol(bindir, nodes):
    """bindir/scontrol for {node: (state, reason)}; returns the state file path (read it with calls())."""
    os.makedirs(bindir, exist_ok=True)
    state_path = os.path.join(bindir, "scontrol-state.json")
    with open(state_path, "w") as handle:
        json.dump({"template": _template(), "calls": [],
                   "nodes": {name: {"state": state, "reason": reason} for name, (state, reason) in nodes.items()}}, handle)
    path = os.path.join(bindir, "scontrol")
    with open(path, "w") as handle:
        handle.write("#!%s\n%s" % (sys.executable, _SCRIPT % {"state": state_path}))
    os.chmod(path, 0o755)
    return state_path


def read_state(state_path):
    with open(state_path) as handle:
        return json.load(handle)

"""A stateful stand-in for amd-smi, for tests only: a recorded `amd-smi static --json` with the power cap editable.

    python3 fake_amd_smi_state.py seed RECORDING.json STATE.json               # state from a real `amd-smi static --json`
    HYDRA_FAKE_AMD_SMI_STATE=STATE.json python3 fake_amd_smi_state.py ARGS...  # behave as `amd-smi ARGS...`

It answers what the gpu_settings role runs: `static --json` replays the recording with the state's power cap
edited in (limit.ppt0.socket_power_limit or limit.socket_power, whichever the recording has), `list --json` the
GPU's index, PCI address and UUID from the recording, `metric --json` a bare per-GPU list (no redistributable
recording of `amd-smi metric --json` is in the repo; the power cap is a static value), and
`set --gpu N --power-cap W` (also `-g` / `-o`, whole watts as amdsmi_cli's parser takes them) changes the state.
Every call is logged in state["calls"]; anything else exits 2, so an unexpected call fails the test.

HYDRA_FAKE_AMD_SMI_DROP_SETS=1 makes `set` report success and change nothing.
"""

import json
import os
import sys


def _gpus(document):
    return document["gpu_data"] if isinstance(document, dict) and "gpu_data" in document else document


def _cap_holder(gpu):
    """(dict, key) holding the power cap in one GPU's static record."""
    limit = gpu["limit"]
    if isinstance(limit.get("ppt0"), dict):
        return limit["ppt0"], "socket_power_limit"
    return limit, "socket_power"


def _set_cap(gpu, watts):
    holder, key = _cap_holder(gpu)
    if isinstance(holder.get(key), dict):
        holder[key]["value"] = watts
    else:
        holder[key] = watts


def seed(recording, state_path):
    with open(recording) as handle:
        static = json.load(handle)
    with open(state_path, "w") as handle:
        json.dump({"static": static, "calls": []}, handle, indent=1)


def fail(message):
    sys.stderr.write("fake amd-smi: %s\n" % message)
    sys.exit(2)


def main(argv):
    if argv[:1] == ["seed"]:
        seed(argv[1], argv[2])
        return 0
    path = os.environ["HYDRA_FAKE_AMD_SMI_STATE"]
    with open(path) as handle:
        state = json.load(handle)
    state["calls"].append(argv)
    gpus = _gpus(state["static"])
    if argv == ["static", "--json"]:
        print(json.dumps(state["static"]))
    elif argv == ["metric", "--json"]:
        print(json.dumps([{"gpu": gpu["gpu"]} for gpu in gpus]))
    elif argv == ["list", "--json"]:
        print(json.dumps([{"gpu": gpu["gpu"], "bdf": gpu.get("bus", {}).get("bdf"),
                           "uuid": gpu.get("asic", {}).get("asic_serial")} for gpu in gpus]))
    elif argv[:1] == ["set"] and len(argv) == 5 and argv[1] in ("-g", "--gpu") and argv[3] in ("-o", "--power-cap"):
        matches = [gpu for gpu in gpus if str(gpu["gpu"]) == argv[2]]
        if not matches:
            fail("no GPU %s" % argv[2])
        try:
            watts = int(argv[4])
        except ValueError:
            fail("--power-cap takes whole watts, got %r" % argv[4])
        if watts <= 0:
            fail("--power-cap must be positive, got %r" % argv[4])
        if os.environ.get("HYDRA_FAKE_AMD_SMI_DROP_SETS") != "1":
            _set_cap(matches[0], watts)
        print("GPU: %s\n    POWERCAP: Successfully set power cap to %d W" % (argv[2], watts))
    else:
        with open(path, "w") as handle:
            json.dump(state, handle, indent=1)
        fail("unexpected call: %s" % " ".join(argv))
    with open(path, "w") as handle:
        json.dump(state, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

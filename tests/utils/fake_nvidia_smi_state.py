"""A stateful stand-in for nvidia-smi, for tests only: the GPUs' settings live in a JSON file.

    python3 fake_nvidia_smi_state.py seed RECORDING.xml STATE.json [--gpus N]   # state from a real `nvidia-smi -q -x`
    HYDRA_FAKE_SMI_STATE=STATE.json python3 fake_nvidia_smi_state.py ARGS...     # behave as `nvidia-smi ARGS...`

`nvidia-smi -q -x` replays the real recording the state was seeded from, with the state's settings edited in,
so doctor sees what the roles set. It answers exactly the subcommands the gpu_settings and mig roles run, in nvidia-smi's output format
(`--query-gpu=... --format=csv,noheader,nounits`, `--query-compute-apps=...`, `-pm`, `-pl`, `-ac`, `-lgc`, `-c`,
`-e`, `-mig`, `mig -lgi/-cgi/-dgi/-dci`), changes the state file as the driver would, and logs every call in
state["calls"], so a test can assert both the settings and which commands ran. Anything else exits 2 with an
error, so an unexpected call fails the test instead of passing silently.

HYDRA_FAKE_SMI_READONLY=1 makes every setting fail (Insufficient Permissions); HYDRA_FAKE_SMI_DROP_SETS=1 makes
settings report success and change nothing; HYDRA_FAKE_SMI_MIG_NEEDS_RESET=1 leaves a MIG mode change pending.
"""

import json
import os
import re
import sys
import xml.etree.ElementTree as ET

COMPUTE_MODES = {"0": "Default", "2": "Prohibited", "3": "Exclusive_Process",
                 "DEFAULT": "Default", "PROHIBITED": "Prohibited", "EXCLUSIVE_PROCESS": "Exclusive_Process"}
# A100 GPU instance profiles (MIG user guide): name -> (profile id, slices)
MIG_PROFILES = {"1g.10gb": (19, 1), "1g.20gb": (15, 1), "2g.20gb": (14, 2), "3g.40gb": (9, 3), "4g.40gb": (5, 4),
                "7g.80gb": (0, 7)}


def _text(gpu, *paths):
    for path in paths:
        node = gpu.find(path)
        if node is not None and node.text and node.text.strip() not in ("N/A", ""):
            return node.text.strip()
    return None


def _number(text):
    return float(text.split()[0]) if text else None


def seed(recording, state_path, count):
    gpu = ET.parse(recording).getroot().find("gpu")
    base = {
        "name": _text(gpu, "product_name"),
        "uuid": _text(gpu, "uuid"),
        "pci_bus_id": _text(gpu, "pci/pci_bus_id"),
        "persistence_mode": _text(gpu, "persistence_mode"),
        "power_limit": _number(_text(gpu, ".//current_power_limit", ".//power_limit")),
        "default_power_limit": _number(_text(gpu, ".//default_power_limit")),
        "min_power_limit": _number(_text(gpu, ".//min_power_limit")),
        "max_power_limit": _number(_text(gpu, ".//max_power_limit")),
        "application_clocks": {"memory": int(_number(_text(gpu, "applications_clocks/mem_clock"))),
                               "graphics": int(_number(_text(gpu, "applications_clocks/graphics_clock")))},
        "supported_clocks": dict(
            (str(int(_number(mem.findtext("value")))),
             [int(_number(g.text)) for g in mem.findall("supported_graphics_clock")])
            for mem in gpu.findall("supported_clocks/supported_mem_clock")),
        "locked_clocks": None,
        "compute_mode": _text(gpu, "compute_mode"),
        "ecc_mode_current": _text(gpu, "ecc_mode/current_ecc"),
        "ecc_mode_pending": _text(gpu, "ecc_mode/pending_ecc"),
        "mig_mode_current": _text(gpu, "mig_mode/current_mig"),
        "mig_mode_pending": _text(gpu, "mig_mode/pending_mig"),
        "gpu_instances": [],
        "processes": [],
    }
    gpus = []
    for index in range(count):
        gpu_state = json.loads(json.dumps(base))
        gpu_state["index"] = index
        # Distinct identities for the copies of the one recorded GPU.
        gpu_state["uuid"] = base["uuid"][:-2] + "%02x" % index
        gpu_state["pci_bus_id"] = "00000000:%02X:00.0" % (int(base["pci_bus_id"].split(":")[1], 16) + index)
        gpus.append(gpu_state)
    _save(state_path, {"gpus": gpus, "calls": [], "recording": os.path.abspath(recording)})


def _load(path):
    with open(path) as handle:
        return json.load(handle)


def _save(path, state):
    temp = path + ".tmp"
    with open(temp, "w") as handle:
        json.dump(state, handle, indent=1, sort_keys=True)
    os.replace(temp, path)


class Fail(Exception):
    def __init__(self, message, rc=2):
        Exception.__init__(self, message)
        self.rc = rc


def _fmt(value):
    if value is None:
        return "[N/A]"
    if isinstance(value, float):
        return "%.2f" % value
    return str(value)


QUERY = {
    "index": lambda g: g["index"],
    "uuid": lambda g: g["uuid"],
    "pci.bus_id": lambda g: g["pci_bus_id"],
    "name": lambda g: g["name"],
    "persistence_mode": lambda g: g["persistence_mode"],
    "power.limit": lambda g: g["power_limit"],
    "power.default_limit": lambda g: g["default_power_limit"],
    "power.min_limit": lambda g: g["min_power_limit"],
    "power.max_limit": lambda g: g["max_power_limit"],
    "clocks.applications.memory": lambda g: g["application_clocks"]["memory"],
    "clocks.applications.graphics": lambda g: g["application_clocks"]["graphics"],
    "compute_mode": lambda g: g["compute_mode"],
    "ecc.mode.current": lambda g: g["ecc_mode_current"],
    "ecc.mode.pending": lambda g: g["ecc_mode_pending"],
    "mig.mode.current": lambda g: g["mig_mode_current"],
    "mig.mode.pending": lambda g: g["mig_mode_pending"],
}
UNITS = {"power.limit": " W", "power.default_limit": " W", "power.min_limit": " W", "power.max_limit": " W",
         "clocks.applications.memory": " MHz", "clocks.applications.graphics": " MHz"}


def _csv(rows, fields, fmt):
    lines = []
    if "noheader" not in fmt:
        lines.append(", ".join(fields))
    for row in rows:
        lines.append(", ".join(row))
    return "\n".join(lines) + ("\n" if lines else "")


def query_gpu(state, fields, fmt, selected):
    rows = []
    for gpu in selected:
        row = []
        for field in fields:
            if field not in QUERY:
                raise Fail('Field "%s" is not a valid field to query.' % field)
            value = QUERY[field](gpu)
            text = _fmt(value)
            if value is not None and "nounits" not in fmt:
                text += UNITS.get(field, "")
            row.append(text)
        rows.append(row)
    return _csv(rows, fields, fmt)


def query_apps(state, fields, fmt):
    rows = []
    for gpu in state["gpus"]:
        for proc in gpu["processes"]:
            values = {"pid": str(proc["pid"]), "gpu_uuid": gpu["uuid"], "process_name": proc["name"],
                      "used_memory": str(proc["used_memory"]) + ("" if "nounits" in fmt else " MiB"),
                      "gpu_bus_id": gpu["pci_bus_id"]}
            rows.append([values[f] for f in fields])
    return _csv(rows, fields, fmt)


def _select(state, index):
    if index is None:
        return state["gpus"]
    match = [g for g in state["gpus"] if index in (str(g["index"]), g["uuid"], g["pci_bus_id"])]
    if not match:
        raise Fail("No devices were found", rc=6)
    return match


def set_setting(state, opt, value, selected):
    out = []
    for gpu in selected:
        bus = gpu["pci_bus_id"]
        if opt == "-pm":
            gpu["persistence_mode"] = "Enabled" if value == "1" else "Disabled"
            out.append("%s persistence mode for GPU %s." % ("Enabled" if value == "1" else "Disabled", bus))
        elif opt == "-pl":
            watts = float(value)
            if not gpu["min_power_limit"] <= watts <= gpu["max_power_limit"]:
                raise Fail("Provided power limit %.2f W is not a valid power limit which should be between %.2f W and "
                           "%.2f W for GPU %s\nTerminating early due to previous errors." % (
                               watts, gpu["min_power_limit"], gpu["max_power_limit"], bus))
            out.append("Power limit for GPU %s was set to %.2f W from %.2f W." % (bus, watts, gpu["power_limit"]))
            gpu["power_limit"] = watts
        elif opt == "-ac":
            memory, graphics = [int(v) for v in value.split(",")]
            if graphics not in gpu["supported_clocks"].get(str(memory), []):
                raise Fail('Specified clock combination "(MEM %d, SM %d)" is not supported for GPU %s. Run \'nvidia-smi '
                           '-q -d SUPPORTED_CLOCKS\' to see list of supported clock combinations\n'
                           'Terminating early due to previous errors.' % (memory, graphics, bus))
            gpu["application_clocks"] = {"memory": memory, "graphics": graphics}
            out.append('Applications clocks set to "(MEM %d, SM %d)" for GPU %s' % (memory, graphics, bus))
        elif opt == "-lgc":
            low, high = [int(v) for v in value.split(",")]
            gpu["locked_clocks"] = {"min": low, "max": high}
            out.append('GPU clocks set to "(gpuClkMin %d, gpuClkMax %d)" for GPU %s' % (low, high, bus))
        elif opt == "-c":
            if value not in COMPUTE_MODES:
                raise Fail('Invalid compute mode "%s"' % value)
            gpu["compute_mode"] = COMPUTE_MODES[value]
            out.append("Set compute mode to %s for GPU %s." % (COMPUTE_MODES[value].upper(), bus))
        elif opt == "-e":
            gpu["ecc_mode_pending"] = "Enabled" if value == "1" else "Disabled"
            out.append("%s ECC support for GPU %s." % ("Enabled" if value == "1" else "Disabled", bus))
        elif opt == "-mig":
            if gpu["mig_mode_current"] is None:
                raise Fail("Unable to %s MIG Mode for GPU %s: Not Supported" % ("enable" if value == "1" else "disable", bus), rc=3)
            if gpu["processes"]:
                raise Fail("Unable to %s MIG Mode for GPU %s: In use by another client" % (
                    "enable" if value == "1" else "disable", bus), rc=3)
            gpu["mig_mode_pending"] = "Enabled" if value == "1" else "Disabled"
            # The driver resets an idle GPU at once on most products; some wait for a reset or reboot.
            if not os.environ.get("HYDRA_FAKE_SMI_MIG_NEEDS_RESET"):
                gpu["mig_mode_current"] = gpu["mig_mode_pending"]
            if value != "1":
                gpu["gpu_instances"] = []
            out.append("%s MIG Mode for GPU %s" % ("Enabled" if value == "1" else "Disabled", bus))
    out.append("All done.")
    if opt == "-e":
        out.append("Reboot required.")
    return "\n".join(out) + "\n"


def mig(state, args):
    index = None
    if "-i" in args:
        index = args[args.index("-i") + 1]
    selected = _select(state, index)
    for gpu in selected:
        if gpu["mig_mode_current"] != "Enabled":
            raise Fail("No MIG-enabled devices found.", rc=6)
    if "-lgi" in args:
        rows = [(gpu["index"], gi) for gpu in selected for gi in gpu["gpu_instances"]]
        if not rows:
            raise Fail("No GPU instances found: Not Found", rc=6)
        rule = "+" + "-" * 52 + "+"
        lines = [rule, "| GPU instances:%s|" % (" " * 38), "| GPU   Name          Profile  Instance   Placement  |",
                 "|                       ID       ID       Start:Size |", "|" + "=" * 52 + "|"]
        for gpu_index, gi in rows:
            lines.append("|  %2d  MIG %-9s   %4d     %4d        %5s     |" % (
                gpu_index, gi["profile"], gi["profile_id"], gi["id"], "%d:%d" % (gi["start"], gi["size"])))
            lines.append(rule)
        return "\n".join(lines) + "\n"
    if "-dci" in args:
        out = []
        for gpu in selected:
            for gi in gpu["gpu_instances"]:
                if gi.get("compute_instance"):
                    gi["compute_instance"] = False
                    out.append("Successfully destroyed compute instance ID  0 from GPU %2d GPU instance ID %2d" % (gpu["index"], gi["id"]))
        if not out:
            raise Fail("No compute instances found: Not Found", rc=6)
        return "\n".join(out) + "\n"
    if "-dgi" in args:
        out = []
        for gpu in selected:
            for gi in gpu["gpu_instances"]:
                if gi.get("compute_instance"):
                    raise Fail("Unable to destroy GPU instance ID %2d from GPU %2d: In use by another client" % (gi["id"], gpu["index"]), rc=3)
                out.append("Successfully destroyed GPU instance ID %2d from GPU %2d" % (gi["id"], gpu["index"]))
            gpu["gpu_instances"] = []
        if not out:
            raise Fail("No GPU instances found: Not Found", rc=6)
        return "\n".join(out) + "\n"
    if "-cgi" in args:
        profiles = args[args.index("-cgi") + 1].split(",")
        with_ci = "-C" in args
        out = []
        for gpu in selected:
            used = sum(gi["size"] for gi in gpu["gpu_instances"])
            next_id = max([gi["id"] for gi in gpu["gpu_instances"]] + [0]) + 1
            for name in profiles:
                if name not in MIG_PROFILES:
                    raise Fail("Unable to create a GPU instance on GPU %2d using profile %s: Invalid Argument" % (gpu["index"], name), rc=2)
                profile_id, size = MIG_PROFILES[name]
                if used + size > 7:
                    raise Fail("Unable to create a GPU instance on GPU %2d using profile %d: Insufficient Resources" % (
                        gpu["index"], profile_id), rc=2)
                gpu["gpu_instances"].append({"profile": name, "profile_id": profile_id, "id": next_id, "start": used,
                                             "size": size, "compute_instance": with_ci})
                out.append("Successfully created GPU instance ID %2d on GPU %2d using profile MIG %s (ID %2d)" % (
                    next_id, gpu["index"], name, profile_id))
                if with_ci:
                    out.append("Successfully created compute instance ID  0 on GPU %2d GPU instance ID %2d using profile "
                               "MIG %s (ID  0)" % (gpu["index"], next_id, name))
                used += size
                next_id += 1
        return "\n".join(out) + "\n"
    raise Fail("fake nvidia-smi: unsupported mig arguments %r" % (args,))


def _sub(xml, pattern, value, count=1):
    """Replace the text of the first `count` elements matching pattern (a tag) in a copy of the recording."""
    return re.sub(r"(<%s>)[^<]*(</%s>)" % (pattern, pattern), lambda m: m.group(1) + value + m.group(2), xml, count=count)


def query_xml(state):
    """`nvidia-smi -q -x`: the real recording, its one <gpu> repeated per GPU with the state's settings edited in."""
    with open(state["recording"]) as handle:
        recording = handle.read()
    start, end = recording.index("<gpu id="), recording.index("</gpu>") + len("</gpu>")
    blocks = []
    for gpu in state["gpus"]:
        block = recording[start:end]
        block = re.sub(r'<gpu id="[^"]*">', '<gpu id="%s">' % gpu["pci_bus_id"], block, count=1)
        block = _sub(block, "pci_bus_id", gpu["pci_bus_id"])
        block = _sub(block, "pci_bus", gpu["pci_bus_id"].split(":")[1])
        block = _sub(block, "minor_number", str(gpu["index"]))
        block = _sub(block, "uuid", gpu["uuid"])
        block = _sub(block, "persistence_mode", gpu["persistence_mode"])
        block = _sub(block, "compute_mode", gpu["compute_mode"])
        block = _sub(block, "current_ecc", gpu["ecc_mode_current"] or "N/A")
        block = _sub(block, "pending_ecc", gpu["ecc_mode_pending"] or "N/A")
        block = _sub(block, "current_mig", gpu["mig_mode_current"] or "N/A")
        block = _sub(block, "pending_mig", gpu["mig_mode_pending"] or "N/A")
        block = _sub(block, "current_power_limit", "%.2f W" % gpu["power_limit"])
        blocks.append(block)
    xml = recording[:start] + "\n    ".join(blocks) + recording[end:]
    return _sub(xml, "attached_gpus", str(len(state["gpus"])))


def run(argv, state):
    if argv and argv[0] == "mig":
        return mig(state, argv[1:])
    if "-q" in argv and "-x" in argv:
        return query_xml(state)
    fmt = ""
    index = None
    query = None
    setting = None
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg.startswith("--format="):
            fmt = arg.split("=", 1)[1]
        elif arg.startswith("--query-gpu=") or arg.startswith("--query-compute-apps="):
            query = arg
        elif arg in ("-i", "--id"):
            index = args.pop(0)
        elif arg in ("-pm", "-pl", "-ac", "-lgc", "-c", "-e", "-mig"):
            setting = (arg, args.pop(0))
        else:
            raise Fail("fake nvidia-smi: unsupported argument %r in %r" % (arg, argv))
    if query:
        fields = query.split("=", 1)[1].split(",")
        if query.startswith("--query-compute-apps="):
            return query_apps(state, fields, fmt)
        return query_gpu(state, fields, fmt, _select(state, index))
    if setting:
        if os.environ.get("HYDRA_FAKE_SMI_READONLY"):
            raise Fail("Unable to set %s for GPU: Insufficient Permissions" % setting[0], rc=4)
        if os.environ.get("HYDRA_FAKE_SMI_DROP_SETS"):
            # A driver that says "All done." and changes nothing: what verification after a change is for.
            scratch = json.loads(json.dumps(state))
            return set_setting(scratch, setting[0], setting[1], _select(scratch, index))
        return set_setting(state, setting[0], setting[1], _select(state, index))
    raise Fail("fake nvidia-smi: nothing to do for %r" % (argv,))


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "seed":
        count = int(sys.argv[sys.argv.index("--gpus") + 1]) if "--gpus" in sys.argv else 1
        seed(sys.argv[2], sys.argv[3], count)
        return 0
    path = os.environ.get("HYDRA_FAKE_SMI_STATE")
    if not path:
        sys.stderr.write("fake nvidia-smi: HYDRA_FAKE_SMI_STATE is not set\n")
        return 2
    state = _load(path)
    state["calls"].append(sys.argv[1:])
    try:
        out = run(sys.argv[1:], state)
        rc = 0
    except Fail as exc:
        out, rc = str(exc) + "\n", exc.rc
    _save(path, state)
    (sys.stdout if rc == 0 else sys.stderr).write(out)
    return rc


if __name__ == "__main__":
    sys.exit(main())

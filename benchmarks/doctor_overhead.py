"""doctor's own cost: module wall time vs. the wall time of its probes alone, in one script.

Two figures, each the median of per-round ratios over N interleaved rounds (noisy machines:
compare only within a round):
- in-process: `_doctor.run()` (probes + checks + result) / the same probes collected alone;
- whole process: the module run as Ansible runs it (fresh interpreter, AnsibleModule, JSON out) /
  a fresh interpreter collecting the probes alone. Its difference is mostly the fixed import of
  ansible.module_utils.basic (~0.2 s), which weighs most where probes are cheapest (a fake nvidia-smi).
It also counts how many times nvidia-smi -q was executed per doctor run (must be 1).

Without a GPU it replays a real recording through a fake nvidia-smi first on PATH (the same technique
as the integration tests); with --real it uses whatever nvidia-smi the machine has.

    PYTHONPATH=collections .venv/bin/python benchmarks/doctor_overhead.py [--rounds 7] [--real]
Target (issue 3): module / probes <= 1.5.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(REPO, "collections")
FIXTURE = os.path.join(REPO, "tests", "fixtures", "nvidia-smi", "a100-sxm4-v12.xml")

PROBES_ONLY = """
import sys
from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as _doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import catalogue
options = {"timeouts": dict(_doctor.DEFAULT_TIMEOUTS), "nvidia_smi_path": None, "torch_python": None, "expect": {}}
names = list(_doctor.ALWAYS_PROBED) + [p for c in CATALOGUE for p in c.probes]
catalogue.collect(names, options)
"""

IN_PROCESS = PROBES_ONLY.replace("catalogue.collect(names, options)", '''
import json, time
ratios = []
for _ in range(%d):
    start = time.perf_counter(); catalogue.collect(names, options); probes = time.perf_counter() - start
    start = time.perf_counter(); _doctor.run(); whole = time.perf_counter() - start
    ratios.append(whole / probes)
print(json.dumps(ratios))
''')


def fake_tools(directory):
    counter = os.path.join(directory, "calls")
    with open(os.path.join(directory, "nvidia-smi"), "w") as handle:
        handle.write('#!/bin/sh\necho "$*" >> "%s"\ncase "$*" in *-q*) exec cat "%s" ;; esac\nexit 0\n' % (counter, FIXTURE))
    os.chmod(os.path.join(directory, "nvidia-smi"), 0o755)
    return counter


def timed(argv, env):
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (argv, proc.stdout[-2000:], proc.stderr[-2000:]))
    return time.perf_counter() - start, proc.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--real", action="store_true", help="use the machine's nvidia-smi")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=COLLECTIONS)
        counter = None
        if not args.real:
            counter = fake_tools(tmp)
            env["PATH"] = tmp + os.pathsep + env["PATH"]
        args_file = os.path.join(tmp, "args.json")
        with open(args_file, "w") as handle:
            json.dump({"ANSIBLE_MODULE_ARGS": {}}, handle)
        module = [sys.executable, "-m", "ansible_collections.continuum.hydra.plugins.modules.doctor", args_file]
        probes = [sys.executable, "-c", PROBES_ONLY]
        ratios, module_s, probes_s, calls = [], [], [], []
        for dummy in range(args.rounds):
            if counter and os.path.exists(counter):
                os.unlink(counter)
            m, out = timed(module, env)
            if counter:
                with open(counter) as handle:
                    calls.append(sum(1 for line in handle if "-q" in line))
            p, dummy = timed(probes, env)
            ratios.append(m / p)
            module_s.append(m)
            probes_s.append(p)
        result = json.loads(out)
        print("checks run: %d (%s)" % (len(result["checks"]), ", ".join("%s=%d" % kv for kv in sorted(result["summary"].items()))))
        print("module  median %.3f s   probes alone median %.3f s" % (statistics.median(module_s), statistics.median(probes_s)))
        print("whole process, module/probes: median %.3f  (min %.3f, max %.3f)" % (
            statistics.median(ratios), min(ratios), max(ratios)))
        dummy, out = timed([sys.executable, "-c", IN_PROCESS % args.rounds], env)
        inproc = json.loads(out)
        print("in-process, doctor.run/probes: median %.3f  (min %.3f, max %.3f; target <= 1.5)" % (
            statistics.median(inproc), min(inproc), max(inproc)))
        if calls:
            print("nvidia-smi -q executions per doctor run: %s (target 1)" % sorted(set(calls)))


if __name__ == "__main__":
    main()

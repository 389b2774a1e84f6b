"""What each doctor level costs on localhost, as a multiple of `ansible localhost -m ping`.

Each round runs, interleaved (noisy machines: compare only within a round), `ansible localhost -m ping` and
`ansible localhost -m continuum.hydra.doctor -a level=<quick|standard|deep>`, all with the local connection and the
same interpreter; the figure per level is the median of its per-round ratio to that round's ping. Without a GPU a
real recording is replayed through a fake nvidia-smi first on PATH (as the integration tests do); with --real the
machine's own tools are used (deep then runs dcgmi diag / rvs where installed: minutes).

    PYTHONPATH=collections .venv/bin/python benchmarks/doctor_levels.py [--rounds 7] [--real]
Target (issue 16): quick <= ~3x ping.
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
LEVELS = ("quick", "standard", "deep")


def fake_tools(directory):
    path = os.path.join(directory, "nvidia-smi")
    with open(path, "w") as handle:
        handle.write('#!/bin/sh\ncase "$*" in *-q*) exec cat "%s" ;; esac\nexit 0\n' % FIXTURE)
    os.chmod(path, 0o755)


def timed(argv, env):
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (" ".join(argv), proc.stdout[-2000:], proc.stderr[-2000:]))
    return elapsed, proc.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--real", action="store_true", help="use the machine's own nvidia-smi, dcgmi, rvs")
    args = parser.parse_args()
    ansible = os.path.join(os.path.dirname(sys.executable), "ansible")
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "ansible.cfg")
        with open(config, "w") as handle:
            handle.write("[defaults]\n")  # no project callbacks or settings: the bare cost of one task
        env = dict(os.environ, ANSIBLE_CONFIG=config, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1",
                   ANSIBLE_LOAD_CALLBACK_PLUGINS="0")
        if not args.real:
            fake_tools(tmp)
            env["PATH"] = tmp + os.pathsep + env["PATH"]
        base = [ansible, "localhost", "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable]
        ping = base + ["-m", "ansible.builtin.ping"]
        seconds = {"ping": []}
        ratios = {}
        counts = {}
        for level in LEVELS:
            seconds[level], ratios[level] = [], []
        for _round in range(args.rounds):
            ping_s, dummy_out = timed(ping, env)
            seconds["ping"].append(ping_s)
            for level in LEVELS:
                elapsed, out = timed(base + ["-m", "continuum.hydra.doctor", "-a", "level=%s" % level, "-o"], env)
                seconds[level].append(elapsed)
                ratios[level].append(elapsed / ping_s)
                result = json.loads(out.split("=>", 1)[1]) if "=>" in out else {}
                counts[level] = (len(result.get("checks") or []), len(result.get("probes") or {}))
        print("ansible localhost -m ping: median %.3f s over %d rounds" % (statistics.median(seconds["ping"]), args.rounds))
        for level in LEVELS:
            print("%-8s median %.3f s  x ping: median %.2f (min %.2f, max %.2f)  checks %d, probes %d%s" % (
                level, statistics.median(seconds[level]), statistics.median(ratios[level]), min(ratios[level]),
                max(ratios[level]), counts[level][0], counts[level][1], "  (target <= 3)" if level == "quick" else ""))


if __name__ == "__main__":
    main()

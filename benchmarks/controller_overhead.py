"""Controller cost of playbooks/doctor.yml over many local hosts vs. `ansible -m ping` on the same hosts.

Generates an inventory of --hosts local-connection hosts (ansible_connection=local, this virtualenv's python,
each host a fake nvidia-smi replaying a real recording first on PATH, as tests/integration/test_doctor_fleet.py
does), then runs interleaved rounds of
  (a) ansible -i inv all -m ping -f FORKS                 (the baseline)
  (b) ansible-playbook playbooks/doctor.yml -i inv -f FORKS (the fleet_report callback enabled, reports written)
  (c) with --mitogen: (b) under strategy mitogen_linear
with the repository's ansible.cfg (what `make doctor` uses) for all of them; the order within a round rotates.
Prints the median wall times and the ratios doctor/ping and doctor-mitogen/ping (medians of per-round ratios:
the machines are noisy, compare only within a round).

doctor keeps its compiled code in a per-user cache on each host (_host/import_cache.py): here every host is this
machine, so the first run fills it and later rounds load it, as a fleet's second and later runs do. The cache
lives in the run's temporary directory (XDG_CACHE_HOME), and PYTHONDONTWRITEBYTECODE, which CI sandboxes export
and fleets do not, is cleared for every command; --no-bytecode-cache keeps it set (no cache: the cost of a
host's first run, or of a host where Python may not write bytecode).

    PYTHONPATH=collections .venv/bin/python benchmarks/controller_overhead.py [--hosts 100] [--rounds 5] [--forks 25]
        [--mitogen [--mitogen-path DIR]] [--extra-vars JSON]
Target (issue 14): doctor / ping <= 1.5 at 100 hosts.

--mitogen needs mitogen importable by this python (`pip install mitogen==0.3.54`), or --mitogen-path naming a
directory that holds the ansible_mitogen package (`pip install --target DIR mitogen==0.3.54`).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

from ansible_collections.continuum.hydra.tests.support.fleet import PERSISTENCE_ON, fixture, host_vars, plant, write_host_bin

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_BIN = os.path.dirname(sys.executable)


def write_inventory(root, count):
    a100 = plant(fixture("a100-sxm4-v12.xml"), PERSISTENCE_ON)
    hosts = {}
    for index in range(count):
        name = "node-%03d" % index
        hosts[name] = host_vars(write_host_bin(root, name, a100))
    path = os.path.join(root, "inventory.yml")
    with open(path, "w") as handle:
        yaml.safe_dump({"all": {"hosts": hosts}}, handle)
    return path


def mitogen_strategy_dir(extra_path):
    """The strategy plugin directory of the installed ansible_mitogen, or exit with what to install."""
    env = dict(os.environ)
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, env.get("PYTHONPATH")) if p)
    probe = subprocess.run([sys.executable, "-c", "import os, ansible_mitogen; print(os.path.dirname(ansible_mitogen.__file__))"],
                           env=env, capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        sys.exit("--mitogen: ansible_mitogen is not importable (pip install mitogen==0.3.54, or --mitogen-path DIR)")
    return os.path.join(probe.stdout.strip(), "plugins", "strategy")


def timed(argv, env):
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800, cwd=REPO, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit("failed (rc %d): %s\n%s%s" % (proc.returncode, " ".join(argv), proc.stdout[-3000:], proc.stderr[-3000:]))
    return elapsed, proc.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--forks", type=int, default=25, help="for both commands (ansible.cfg's default is 25)")
    parser.add_argument("--mitogen", action="store_true", help="also run doctor.yml under strategy mitogen_linear")
    parser.add_argument("--mitogen-path", help="a directory holding ansible_mitogen (pip install --target)")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="run with PYTHONDONTWRITEBYTECODE=1: doctor compiles its code on every run")
    parser.add_argument("--extra-vars", metavar="JSON", help="passed to doctor.yml as -e, e.g. '{\"hydra_only\": [\"driver\"]}' "
                        "to split the module's fixed cost (imports) from its probes")
    args = parser.parse_args()
    if args.hosts < 1 or args.rounds < 1 or args.forks < 1:
        sys.exit("--hosts, --rounds and --forks must be at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        inventory = write_inventory(tmp, args.hosts)
        env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
                   ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"), HYDRA_REPORT_DIR=os.path.join(tmp, "reports"),
                   ANSIBLE_NOCOLOR="1", PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""),
                   XDG_CACHE_HOME=os.path.join(tmp, "cache"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if args.no_bytecode_cache:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        forks = ["-f", str(args.forks)]
        commands = {
            "ping": ([os.path.join(VENV_BIN, "ansible"), "-i", inventory, "all", "-m", "ping"] + forks, env),
            "doctor": ([os.path.join(VENV_BIN, "ansible-playbook"), "-i", inventory, "playbooks/doctor.yml"] + forks
                       + (["-e", args.extra_vars] if args.extra_vars else []), env),
        }
        if args.mitogen:
            menv = dict(env, ANSIBLE_STRATEGY_PLUGINS=mitogen_strategy_dir(args.mitogen_path), ANSIBLE_STRATEGY="mitogen_linear")
            if args.mitogen_path:
                menv["PYTHONPATH"] = os.pathsep.join(p for p in (args.mitogen_path, env.get("PYTHONPATH")) if p)
            commands["doctor-mitogen"] = (commands["doctor"][0], menv)
        names = list(commands)
        times = dict((name, []) for name in names)
        ratios = dict((name, []) for name in names if name != "ping")
        for index in range(args.rounds):
            order = names[index % len(names):] + names[:index % len(names)]
            took = {}
            for name in order:
                argv, cmd_env = commands[name]
                took[name], dummy = timed(argv, cmd_env)
                times[name].append(took[name])
            for name in ratios:
                ratios[name].append(took[name] / took["ping"])
            print("round %d: %s" % (index + 1, "  ".join("%s %.2f s" % (n, took[n]) for n in names)), flush=True)
        extra = "; doctor.yml -e %s" % args.extra_vars if args.extra_vars else ""
        extra += "; no bytecode cache (PYTHONDONTWRITEBYTECODE=1)" if args.no_bytecode_cache else ""
        print("%d hosts, %d forks, %d rounds (ansible.cfg: %s)%s" % (args.hosts, args.forks, args.rounds, env["ANSIBLE_CONFIG"], extra))
        for name in names:
            print("%-15s median %.2f s  (min %.2f, max %.2f)" % (name, statistics.median(times[name]), min(times[name]), max(times[name])))
        for name, values in ratios.items():
            print("%s/ping: median %.3f  (min %.3f, max %.3f)%s" % (
                name, statistics.median(values), min(values), max(values), "  target <= 1.5" if name == "doctor" else ""))


if __name__ == "__main__":
    main()

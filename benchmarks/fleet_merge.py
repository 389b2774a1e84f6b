"""Cost and memory per host of playbooks/merge.yml: the parts of a sliced run merged into one fleet report.

Each size is a workflow of PARTS slice parts (files under <report_dir>/parts/<workflow>/, as the fleet_report callback
of each AWX slice writes them) of HOSTS whole doctor results each (tests/support/whole_host.py, as
benchmarks/fleet_analysis.py uses), and an inventory of every host. The timed work is the real
`ansible-playbook playbooks/merge.yml`: the fleet_merge action reads and merges the parts, Ansible carries its result
to the callback, which writes every format. Rounds alternate the two sizes; the figure is the median wall time per
host at the large size over the small one, and the peak resident memory of the play's largest process (getrusage)
per host more at the large size. The report is checked: every host of every part in it, none missing.

    PYTHONPATH=collections .venv/bin/python benchmarks/fleet_merge.py [--parts 10 100] [--hosts-per-part 100] [--rounds 3]

Issue 30 asks for 100 parts of 1,000 hosts: ~49 KB of part file per host is ~5 GB of parts, and the action's worker
and the callback each hold the parsed hosts (~165 KB a host): size the machine first (`free -g`). Targets: per-host
cost at the large size <= 1.1 x at the small; the exit status is 1 when it is above.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from ansible_collections.continuum.hydra.plugins.module_utils._status import MISSING
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import parts
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector
from ansible_collections.continuum.hydra.tests.support.whole_host import whole_fleet

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKFLOW = "77"
MAX_RATIO = 1.1


def prepare(root, n_parts, per_part):
    """The parts of one workflow and the inventory of their hosts; (report_dir, inventory path, bytes of parts)."""
    fleet = whole_fleet(n_parts * per_part, n_parts * per_part)
    collector = FleetCollector()
    for name in sorted(fleet.hosts):
        collector.add_doctor(name, fleet.hosts[name]["doctor"])
        collector.add_profile(name, fleet.hosts[name]["profile"])
    names = sorted(collector.hosts)
    report_dir = os.path.join(root, "reports")
    directory = os.path.join(report_dir, parts.PARTS_DIR, WORKFLOW)
    os.makedirs(directory)
    size = 0
    for job in range(n_parts):
        mine = names[job::n_parts]  # AWX slices round robin by name
        part = parts.build_part(dict((h, collector.hosts[h]) for h in mine), mine, {}, WORKFLOW, str(1000 + job),
                                "2026-11-27T03:00:00+00:00", "doctor.yml")
        path = parts.part_path(report_dir, WORKFLOW, str(1000 + job))
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(part, handle)
        size += os.path.getsize(path)
    inventory = os.path.join(root, "inventory.ini")
    with open(inventory, "w", encoding="utf-8") as handle:
        handle.write("[fleet]\n" + "\n".join(names) + "\n")
    return report_dir, inventory, size


def merge(report_dir, inventory):
    """One real merge.yml run: (seconds, the peak resident KB of its largest process, the JSON report)."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"), HYDRA_REPORT_DIR=report_dir,
               HYDRA_HISTORY_KEEP="0")
    for name in os.listdir(report_dir):
        if name.startswith("fleet-report"):
            os.unlink(os.path.join(report_dir, name))
    started = time.perf_counter()
    # A process of its own around the play, so that its getrusage(RUSAGE_CHILDREN) is this run's peak alone.
    proc = subprocess.run([sys.executable, "-c", PEAK_OF, os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                           "-i", inventory, os.path.join(REPO, "playbooks", "merge.yml"), "-e", "awx_workflow_job_id=" + WORKFLOW],
                          env=env, capture_output=True, text=True, timeout=3600, check=False)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit("merge.yml failed (rc %d): %s" % (proc.returncode, (proc.stdout + proc.stderr)[-2000:]))
    with open(os.path.join(report_dir, "fleet-report.json"), encoding="utf-8") as handle:
        return seconds, int(proc.stderr.split()[-1]), json.load(handle)


PEAK_OF = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
           "sys.stderr.write('%d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(rc)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", type=int, nargs=2, default=[10, 100], metavar=("SMALL", "LARGE"))
    parser.add_argument("--hosts-per-part", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-ratio", type=float, default=MAX_RATIO)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="hydra-merge-")
    try:
        sizes = {}
        for n_parts in args.parts:
            started = time.perf_counter()
            sizes[n_parts] = prepare(os.path.join(root, str(n_parts)), n_parts, args.hosts_per_part)
            print("%d parts of %d hosts: %.1f KB of part file per host, written in %.0f s" % (
                n_parts, args.hosts_per_part, sizes[n_parts][2] / 1024.0 / (n_parts * args.hosts_per_part),
                time.perf_counter() - started), flush=True)
        per_host = dict((n, []) for n in args.parts)
        peak_kb = dict((n, []) for n in args.parts)
        for _unused in range(args.rounds):
            for n_parts in args.parts:
                hosts = n_parts * args.hosts_per_part
                seconds, peak, report = merge(*sizes[n_parts][:2])
                if report["totals"]["hosts"] != hosts or report["totals"].get(MISSING) or report["merge"]["missing"]:
                    raise SystemExit("the merged report of %d parts has %s hosts, %s missing" % (
                        n_parts, report["totals"]["hosts"], report["merge"]["missing"]))
                per_host[n_parts].append(seconds / hosts)
                peak_kb[n_parts].append(peak)
                print("  %d hosts (%d parts): %.0f us per host, peak %.0f MB" % (hosts, n_parts, seconds / hosts * 1e6, peak / 1024.0), flush=True)
        small_n, large_n = (n * args.hosts_per_part for n in args.parts)
        small, large = (statistics.median(per_host[n]) for n in args.parts)
        low, high = (statistics.median(peak_kb[n]) for n in args.parts)
        figures = (small_n, small * 1e6, large_n, large * 1e6, low / 1024.0, high / 1024.0, (high - low) / float(large_n - small_n),
                   sizes[args.parts[1]][2] / 1024.0 / large_n)
        print("per host: %d hosts %.0f us, %d hosts %.0f us; peak resident memory %.0f MB and %.0f MB: %.1f KB per "
              "host more (%.1f KB of part file per host)" % figures)
        ratio = large / small
        print("%s: per-host cost %d / %d hosts %.2fx (target <= %.1fx)" % (
            "PASS" if ratio <= args.max_ratio else "FAIL", large_n, small_n, ratio, args.max_ratio))
        return 0 if ratio <= args.max_ratio else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

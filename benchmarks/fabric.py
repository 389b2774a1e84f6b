# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric test: the standard-library ring against iperf3 on the same link, and isolation at 6, 12 and 16 hosts.

1. Two hosts of the network-namespace bed (tests/support/netns.py). iperf3 one way (-t), then both ways (--bidir,
   per direction), then the ring (two ranks, --size bytes, --iterations) with each reducer this Python has (the
   bed's /usr/bin/python3), then gloo through torch when --torch-python is given. Twice: on the veth as it is (the
   two CPUs are the limit) and with the link shaped to --shaped-mbit by tc tbf on both ends (the link is the
   limit, as a NIC is on real hosts). Ratios are busbw / iperf3 measured in the same script, same link. Goal
   (issue 25): >= 0.7.
2. playbooks/fabric.yml over --isolate hosts (default 6, 12, 16) with one of them shaped to 20 Mbit/s: rounds
   until it is named, the bound ceil(log2 N) + 2, and the wall time.
3. The controller's cost per round: the planner (record + next_round) on a simulated fabric of N hosts.

    PYTHONPATH=collections .venv/bin/python benchmarks/fabric.py [--size 67108864] [--iterations 10] [--seconds 5]
        [--shaped-mbit 1000] [--torch-python /path/to/python] [--isolate 6 12 16] [--skip-isolation]
"""

import argparse
import json
import math
import pathlib
import secrets
import statistics
import subprocess
import sys
import tempfile
import time

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import fabric as planner
from ansible_collections.continuum.hydra.tests.support import fabric as support
from ansible_collections.continuum.hydra.tests.support import netns


def iperf3(bed, sender, receiver, seconds, bidir=False):
    """GB/s received per direction (one way, or the mean of both ways with --bidir)."""
    server = bed.popen(receiver, ["iperf3", "-s", "-1", "-B", receiver.address], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _attempt in range(50):
            argv = ["iperf3", "-c", receiver.address, "-t", str(seconds), "-J"] + (["--bidir"] if bidir else [])
            proc = bed.run(sender, argv, timeout=seconds + 60)
            data = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
            if proc.returncode == 0 and "error" not in data and data.get("end", {}).get("sum_received"):
                end = data["end"]
                if bidir:
                    return (end["sum_received"]["bits_per_second"] + end["sum_received_bidir_reverse"]["bits_per_second"]) / 2 / 8e9
                return end["sum_received"]["bits_per_second"] / 8e9
            time.sleep(0.1)
        raise RuntimeError("iperf3 failed: %s" % proc.stderr)
    finally:
        server.kill()
        server.wait()


def ring(bed, hosts, nbytes, iterations, reducer=None, backend="tcp", torch_python=None, python="/usr/bin/python3"):
    """The group's busbw (GB/s) at nbytes, two ranks started in their namespaces as the module would run them."""
    run_id = "b%s" % secrets.token_hex(4)
    token = secrets.token_hex(16)
    port_file = str(bed.dir / ("%s.port" % run_id))
    procs = []
    for rank, host in enumerate(hosts):
        options = support.rank_options(rank, len(hosts), run_id, token, port_file, host.address, hosts[0].address, None,
                                       sizes=[nbytes], iterations=iterations, warmup=1, join_timeout=120.0, run_timeout=900.0,
                                       step_timeout=60.0, reducer=reducer, backend=backend, torch_python=torch_python)
        if rank:
            options["master_port"] = support.read_port(port_file, 60)
        argv = ["env", "PYTHONPATH=%s" % support.COLLECTIONS, python, "-c", support.RANK_CODE, json.dumps(options)]
        procs.append(bed.popen(host, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    results = [json.loads(p.communicate(timeout=1000)[0]) for p in procs]
    verdict = results[0]["verdict"]
    if not verdict or not verdict.get("complete"):
        raise RuntimeError("the ring did not finish: %s" % results)
    return verdict["rows"][-1]["busbw_gbps"], results[0].get("reducer") or verdict["backend"]


def reducers(python):
    code = ("from ansible_collections.continuum.hydra.plugins.module_utils._fabric import ring\n"
            "names = []\n"
            "for name in ('numpy', 'audioop', 'int'):\n"
            "    try:\n        ring.pick_reducer(name); names.append(name)\n    except ValueError:\n        pass\n"
            "print(' '.join(names))\n")
    out = subprocess.run(["env", "PYTHONPATH=%s" % support.COLLECTIONS, python, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    return out.split()


def link_ratios(args):
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="fabric-bench"))
    bed = netns.Bed(2, tmp)
    try:
        a, b = bed.hosts
        for label, mbit in (("veth as it is (CPU-bound)", None), ("shaped to %g Mbit/s (link-bound)" % args.shaped_mbit, args.shaped_mbit)):
            if mbit:
                bed.shape(a, mbit)
                bed.shape(b, mbit)
            one_way = iperf3(bed, a, b, args.seconds)
            both_ways = iperf3(bed, a, b, args.seconds, bidir=True)
            print("\n%s: iperf3 %.3f GB/s one way, %.3f GB/s per direction both ways" % (label, one_way, both_ways))
            print("| backend / reducer | busbw GB/s | / iperf3 one way | / iperf3 per direction, both ways |")
            print("| --- | --- | --- | --- |")
            # The bed's /usr/bin/python3 (audioop, int), and this Python for NumPy when the system one has none.
            candidates = [("tcp", name, bed.python) for name in reducers(bed.python)]
            if "numpy" not in [name for _b, name, _p in candidates] and "numpy" in reducers(sys.executable):
                candidates.insert(0, ("tcp", "numpy", sys.executable))
            if args.torch_python:
                candidates.append(("gloo", None, bed.python))
            for backend, reducer, python in candidates:
                runs = [ring(bed, [a, b], args.size, args.iterations, reducer=reducer, backend=backend,
                             torch_python=args.torch_python, python=python)[0] for _repeat in range(args.repeats)]
                busbw = statistics.median(runs)
                name = backend if backend != "tcp" else "tcp / %s" % reducer
                print("| %s | %.3f | %.2f | %.2f |" % (name, busbw, busbw / one_way, busbw / both_ways))
    finally:
        bed.close()


def isolation(sizes):
    print("\n| hosts | slow host | rounds until named | bound ceil(log2 N) + 2 | wall time (s) | s per round |")
    print("| --- | --- | --- | --- | --- | --- |")
    for count in sizes:
        tmp = pathlib.Path(tempfile.mkdtemp(prefix="fabric-iso"))
        bed = netns.Bed(count, tmp)
        try:
            slow = bed.hosts[count * 2 // 3].name
            bed.shape(slow, 20)
            inventory = bed.inventory(tmp / "inventory.yml", group_vars={
                "hydra_expect": {"fabric_busbw_gbps_min": 0.02}, "fabric_sizes": [8, 262144], "fabric_iterations": 3,
                "fabric_latency_iterations": 5, "fabric_timeouts": {"join": 60, "step": 10, "run": 180}})
            began = time.monotonic()
            proc, report, killed = support.run_fabric(inventory, tmp / "reports", timeout=1800)
            wall = time.monotonic() - began
            if killed or report is None:
                raise RuntimeError("fabric.yml did not finish: %s" % proc.stdout[-2000:])
            named = {item["host"]: max(item["rounds"]) for item in report["fabric"]["isolated"]}
            rounds = report["fabric"]["round_count"]
            verdict = named.get(slow, "not named: %s" % sorted(named))
            bound = math.ceil(math.log2(count)) + 2
            print("| %d | %s | %s | %d | %.0f | %.1f |" % (count, slow, verdict, bound, wall, wall / max(rounds, 1)))
        finally:
            bed.close()


def controller_cost():
    print("\n| hosts | rounds | planner per round (ms, record + next_round) |")
    print("| --- | --- | --- |")
    for count in (16, 1000, 10000):
        fabric = support.SimulatedFabric(count, slow=(count // 3,), seed=count)
        state = planner.start(fabric.hosts, {h: support.FLOOR for h in fabric.hosts})
        spent, rounds = 0.0, 0
        while True:
            began = time.perf_counter()
            planner.next_round(state)
            spent += time.perf_counter() - began
            if state["done"]:
                break
            plan = state["plan"]
            outcomes = {g["id"]: fabric.outcome(plan["round"], g["members"]) for g in plan["groups"]}
            began = time.perf_counter()
            planner.record(state, outcomes)
            spent += time.perf_counter() - began
            rounds += 1
        print("| %d | %d | %.1f |" % (count, rounds, spent / max(rounds, 1) * 1e3))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64 << 20)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--shaped-mbit", type=float, default=1000)
    parser.add_argument("--torch-python")
    parser.add_argument("--isolate", type=int, nargs="*", default=[6, 12, 16])
    parser.add_argument("--skip-isolation", action="store_true")
    args = parser.parse_args()
    print("fabric benchmark, %s, Python %s on the bed" % (time.strftime("%Y-%m-%d"), sys.version.split()[0]))
    link_ratios(args)
    if not args.skip_isolation:
        isolation(args.isolate)
    controller_cost()


if __name__ == "__main__":
    main()

"""Fabric test helpers: ranks of plugins/module_utils/_fabric run as real processes, and a torch interpreter."""

import json
import os
import random
import secrets
import subprocess
import sys
import time

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import fabric as planner
from ansible_collections.continuum.hydra.tests.support.helpers import REPO

COLLECTIONS = os.path.join(REPO, "collections")
# A rank in its own process: what the module runs, without Ansible around it.
RANK_CODE = ("import json, sys\n"
             "from ansible_collections.continuum.hydra.plugins.module_utils._fabric.rank import run\n"
             "print(json.dumps(run(json.loads(sys.argv[1]))))\n")
TORCH_SPEC = "torch==2.13.0"  # the CPU wheel on the machine's local package mirror
_TORCH: dict[str, str] = {}


def rank_options(rank, world, run_id, token, port_file, address, master_address, master_port=None, **overrides):
    options = {
        "rank": rank, "world": world, "run_id": run_id, "token": token, "host": "h%d" % rank, "address": address,
        "master_address": master_address, "master_port": master_port, "port_file": port_file, "backend": "tcp",
        "sizes": [4, 4096, 1 << 20], "iterations": 3, "warmup": 1, "latency_iterations": 5, "join_timeout": 10.0,
        "step_timeout": 5.0, "run_timeout": 40.0, "port_range": None, "seed": 1, "torch_python": None, "reducer": None,
        "round": 1, "group": "g1",
    }
    options.update(overrides)
    return options


def start_rank(options, python=sys.executable, env=None):
    env = dict(os.environ, PYTHONPATH=COLLECTIONS, **(env or {}))
    return subprocess.Popen([python, "-c", RANK_CODE, json.dumps(options)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)


def read_port(port_file, timeout=30.0):
    """Rank 0's port from its port file (or the error it wrote)."""
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        if os.path.exists(port_file):
            with open(port_file) as handle:
                text = handle.read().strip()
            if text:
                key, _sep, value = text.partition("=")
                return int(value) if key == "port" else value
        time.sleep(0.02)
    raise AssertionError("rank 0 wrote no port file within %ss" % timeout)


def launch_group(world, tmp_path, addresses=None, skip=(), per_rank=None, rank_env=None, **overrides):
    """Start rank 0, read its port, start the others (but those in skip): {rank: Popen}. rank_env: rank -> extra
    environment of that rank's process (CUDA_VISIBLE_DEVICES, say)."""
    run_id = "t%s" % secrets.token_hex(5)
    token = secrets.token_hex(16)
    port_file = str(tmp_path / ("%s.port" % run_id))
    addresses = addresses or ["127.0.0.%d" % (rank + 1) for rank in range(world)]

    def options(rank, port=None):
        extra = dict(overrides)
        extra.update((per_rank or {}).get(rank, {}))
        return rank_options(rank, world, run_id, token, port_file, addresses[rank], addresses[0], port, **extra)

    procs = {0: start_rank(options(0), env=(rank_env or {}).get(0))}
    port = read_port(port_file)
    if not isinstance(port, int):
        procs[0].wait(30)
        return procs, {"port_error": port, "token": token, "run_id": run_id}
    for rank in range(1, world):
        if rank not in skip:
            procs[rank] = start_rank(options(rank, port), env=(rank_env or {}).get(rank))
    return procs, {"port": port, "token": token, "run_id": run_id, "port_file": port_file}


def results(procs, timeout=120):
    """{rank: the rank's fabric result} once every process has ended (a killed one: None)."""
    out = {}
    for rank, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            out[rank] = None if proc.returncode < 0 else {"crash": stderr.decode()[-2000:]}
            continue
        out[rank] = json.loads(stdout)
    return out


def torch_python(tmp_path_factory):
    """An interpreter with torch (the local CPU wheel) for this test session; None when it cannot be installed here."""
    if "python" not in _TORCH:
        venv = tmp_path_factory.getbasetemp() / "fabric-torch-venv"
        python = venv / "bin" / "python"
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
            done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", TORCH_SPEC], capture_output=True,
                                  text=True, timeout=900, check=False)
            if done.returncode != 0:
                _TORCH["python"] = ""
                _TORCH["why"] = "pip install %s failed: %s" % (TORCH_SPEC, done.stderr.strip().splitlines()[-1:])
                return None
        _TORCH["python"] = str(python)
    return _TORCH["python"] or None


def torch_missing_why():
    """Why torch_python() found no torch (one line)."""
    return _TORCH.get("why", "not installed")


PLAYBOOK = os.path.join(REPO, "playbooks", "fabric.yml")
VENV_BIN = os.path.dirname(sys.executable)


def run_fabric(inventory, report_dir, extra_vars=None, timeout=600, playbook=PLAYBOOK):
    """ansible-playbook playbooks/fabric.yml with the fleet report into report_dir, its whole process group killed at
    ``timeout``: (completed process, the fleet report or None, whether it was killed)."""
    from ansible_collections.continuum.hydra.tests.support import netns  # noqa: PLC0415 - only the bed tests need it

    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
               HYDRA_REPORT_DIR=str(report_dir), ANSIBLE_NOCOLOR="1", PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", str(inventory), playbook]
    for key, value in (extra_vars or {}).items():
        argv += ["-e", json.dumps({key: value})]
    proc, killed = netns.run_bounded(argv, timeout, env=env, cwd=REPO)
    path = os.path.join(str(report_dir), "fleet-report.json")
    report = None
    if os.path.exists(path):
        with open(path) as handle:
            report = json.load(handle)
    return proc, report, killed


def host_check(report, host, check_id="fabric.collective"):
    checks = (report["hosts"][host].get("doctor") or {}).get("checks") or []
    return next((c for c in checks if c["id"] == check_id), None)


# ---------------------------------------------------------------- a simulated fabric for the planner

HEALTHY, SLOW, FLOOR = 10.0, 1.0, 5.0


class SimulatedFabric:
    """A simulated fabric for the planner: per-host and per-link capacities (GB/s), hosts that do not join per round.

    A group's bus bandwidth is the lowest capacity of its hosts and of the ring links it uses, times a seeded noise."""

    def __init__(self, count, slow=(), slow_links=(), noise=0.05, seed=0, absent=None):
        self.hosts = ["n%02d" % i for i in range(count)]
        self.capacity = {h: HEALTHY for h in self.hosts}
        for index in slow:
            self.capacity[self.hosts[index]] = SLOW
        self.links = {tuple(sorted((self.hosts[a], self.hosts[b]))): SLOW for a, b in slow_links}
        self.rng = random.Random(seed)
        self.noise = noise
        self.absent = absent or {}  # round -> hosts that do not join in it

    def busbw(self, members):
        capacity = min(self.capacity[h] for h in members)
        for link in planner.ring_links(members):
            capacity = min(capacity, self.links.get(tuple(link), HEALTHY))
        return capacity * (1 + self.rng.uniform(-self.noise, self.noise))

    def outcome(self, number, members):
        absent = [h for h in members if h in self.absent.get(number, ())]
        if absent:
            return {"complete": False, "errors": [{"host": h, "kind": "did not join", "reason": "gone"} for h in absent]}
        return {"complete": True, "errors": [], "busbw_gbps": self.busbw(members), "latency_us": 50.0, "verified": True,
                "backend": "tcp", "rows": []}


def isolate(fabric, floors=True, mode="auto", busy=None, forced=None):
    """Run the planner over the simulated fabric to the end; busy / forced: host -> the idle guard's line."""
    state = planner.start(fabric.hosts, {h: FLOOR for h in fabric.hosts} if floors else {}, {"mode": mode}, busy, forced)
    while True:
        planner.next_round(state)
        if state["done"]:
            return state
        plan = state["plan"]
        used = [h for g in plan["groups"] for h in g["members"]]
        assert len(used) == len(set(used)), "a host is in two groups of one round"
        assert all(len(g["members"]) >= 2 for g in plan["groups"])
        planner.record(state, {g["id"]: fabric.outcome(plan["round"], g["members"]) for g in plan["groups"]})


def named_by(state):
    """The round by which every named host was named."""
    return max((max(bad["rounds"]) for bad in state["bad"].values()), default=0)

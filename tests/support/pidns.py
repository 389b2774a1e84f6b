"""A PID namespace of the test's own: processes started in it, commands run in it, everything else on the machine unseen.

For tests that judge "the co-located processes" (tenant.slo ranks every process on the host by I/O): on a shared
machine another job's writes would rank above the test's own. Inside ``unshare --pid --fork --mount-proc`` /proc
holds only the namespace's processes; the cgroup tree is the host's (PIDs written to cgroup.procs are read in the
writer's namespace). When the session ends, its PID 1 exits and the kernel kills whatever was left in it.
"""

import json
import shutil
import subprocess
import sys

import pytest

SERVER = r'''
import json, os, subprocess, sys, time
children = {}
def rate(pid, seconds):
    def written():
        with open("/proc/%d/io" % pid) as handle:
            return int(dict(line.split(": ") for line in handle.read().splitlines())["write_bytes"])
    first, start = written(), time.monotonic()
    time.sleep(seconds)
    return (written() - first) / (time.monotonic() - start)
for line in sys.stdin:
    cmd = json.loads(line)
    op = cmd["op"]
    try:
        if op == "spawn":
            proc = subprocess.Popen(cmd["argv"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            children[proc.pid] = proc
            out = {"pid": proc.pid}
        elif op == "run":
            proc = subprocess.run(cmd["argv"], capture_output=True, text=True, timeout=cmd.get("timeout", 300),
                                  env=cmd.get("env"), cwd=cmd.get("cwd"), check=False)
            out = {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
        elif op == "rate":
            out = {"bps": rate(cmd["pid"], cmd.get("seconds", 1.5))}
        elif op == "read":
            with open(cmd["path"]) as handle:
                out = {"text": handle.read()}
        elif op == "alive":
            out = {"alive": children[cmd["pid"]].poll() is None}
        elif op == "kill":
            children[cmd["pid"]].kill()
            children[cmd["pid"]].wait()
            out = {}
        else:
            break
    except Exception as exc:
        out = {"error": "%s: %s" % (type(exc).__name__, exc)}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
'''


class PidNamespace:
    def __init__(self):
        self.proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", SERVER],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def call(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the PID namespace session ended (unshare failed?)")
        out = json.loads(line)
        if "error" in out:
            raise RuntimeError("in the PID namespace: %s" % out["error"])
        return out

    def spawn(self, argv):
        """Start argv in the namespace; its PID as the namespace sees it."""
        return self.call(op="spawn", argv=list(argv))["pid"]

    def run(self, argv, env=None, timeout=300, cwd=None):
        return self.call(op="run", argv=list(argv), env=dict(env) if env is not None else None, timeout=timeout, cwd=cwd)

    def write_rate(self, pid, seconds=1.5):
        """Bytes/s the process wrote to storage over ``seconds`` (/proc/<pid>/io write_bytes)."""
        return self.call(op="rate", pid=pid, seconds=seconds)["bps"]

    def read(self, path):
        return self.call(op="read", path=path)["text"]

    def alive(self, pid):
        return self.call(op="alive", pid=pid)["alive"]

    def kill(self, pid):
        self.call(op="kill", pid=pid)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def available():
    """Whether this machine lets us make a PID namespace (root, or user namespaces allowed)."""
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, check=False)
    return probe.returncode == 0


def session():
    """A PidNamespace for one test (closed by the caller); the test is skipped where none can be made."""
    if not available():
        pytest.skip("needs unshare --pid --fork --mount-proc (root, or user namespaces)")
    return PidNamespace()

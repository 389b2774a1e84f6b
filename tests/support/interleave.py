"""Interleaving real processes at a known point, for the tests of what two runs sharing a state file do.

``RenamePause`` stops a real process (an ansible-playbook run, its callback included) right before it renames a
file onto a given path - the commit of an atomic write (``_atomic.write_atomic``) - until the test releases it.
It is a ``sitecustomize`` on the process's PYTHONPATH that adds an audit hook on ``os.rename`` (the event
``os.replace`` raises): the production code runs unchanged, it is only held at that instant. Whatever that process
read before the pause, a second process then runs against; ``openers()`` tells when the second one has the lock
file open (it waits on the lock) as opposed to having finished.
"""

import os
import time

_SITECUSTOMIZE = '''\
import os
import sys
import time

_TARGET = os.environ.get("HYDRA_TEST_PAUSE_RENAME_ONTO")
_DIR = os.environ.get("HYDRA_TEST_PAUSE_DIR")
_PAUSED = []


def _hold(event, args):
    if event != "os.rename" or _PAUSED or os.fspath(args[1]) != _TARGET:
        return
    _PAUSED.append(True)
    with open(os.path.join(_DIR, "paused"), "w") as handle:
        handle.write(str(os.getpid()))
    deadline = time.monotonic() + 600  # never held for ever, should the test die first
    while not os.path.exists(os.path.join(_DIR, "go")) and time.monotonic() < deadline:
        time.sleep(0.02)


if _TARGET and _DIR:
    sys.addaudithook(_hold)
'''


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("waited %g s for %s" % (timeout, what))
        time.sleep(0.05)


class RenamePause:
    """Holds the process started with ``env()`` right before its first rename onto ``target``."""

    def __init__(self, directory, target):
        self.directory = str(directory)
        self.target = os.path.abspath(target)
        os.makedirs(os.path.join(self.directory, "site"), exist_ok=True)
        with open(os.path.join(self.directory, "site", "sitecustomize.py"), "w") as handle:
            handle.write(_SITECUSTOMIZE)

    def env(self, base):
        env = dict(base)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(self.directory, "site"), base.get("PYTHONPATH")) if p)
        env["HYDRA_TEST_PAUSE_RENAME_ONTO"] = self.target
        env["HYDRA_TEST_PAUSE_DIR"] = self.directory
        return env

    def paused_pid(self):
        try:
            with open(os.path.join(self.directory, "paused")) as handle:
                return int(handle.read())
        except (OSError, ValueError):
            return None

    def wait_paused(self, proc, timeout=300):
        """Until the process is held; AssertionError with its output when it ended without getting there."""
        def held_or_ended():
            return self.paused_pid() is not None or proc.poll() is not None
        wait_for(held_or_ended, timeout, "a rename onto %s" % self.target)
        if self.paused_pid() is None:
            out, err = proc.communicate()
            raise AssertionError("the process ended without renaming onto %s:\n%s\n%s" % (self.target, out[-3000:], err[-3000:]))
        return self.paused_pid()

    def release(self):
        with open(os.path.join(self.directory, "go"), "w") as handle:
            handle.write("go")


def openers(path):
    """Pids of the processes that have ``path`` open (read from /proc)."""
    pids = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        fd_dir = os.path.join("/proc", pid, "fd")
        try:
            links = [os.readlink(os.path.join(fd_dir, fd)) for fd in os.listdir(fd_dir)]
        except OSError:
            continue  # gone, or not ours to read
        if path in links:
            pids.add(int(pid))
    return pids

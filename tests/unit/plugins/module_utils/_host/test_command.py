"""_host.command: every command with a deadline, in its own process group, killed as a group."""

import os
import signal
import sys
import time

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host import command
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; only a process still running counts.
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_output_rc_and_locale():
    rc, out, err = command.run([sys.executable, "-c", "import os,sys; print(os.environ['LC_ALL']); sys.exit(3)"], 30)
    assert (rc, out, err) == (3, "C\n", "")
    rc, out, _err = command.run([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], 30, input_text="abc")
    assert rc == 0 and out == "ABC\n"


def test_missing_and_unexecutable_binaries(tmp_path):
    with pytest.raises(ProbeAbsent, match="not found"):
        command.run([str(tmp_path / "nope")], 5)
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(ProbeError, match="permission denied"):
        command.run([str(script)], 5)
    assert command.find_binary("sh") and command.find_binary("no-such-binary-anywhere") is None
    assert command.find_binary("sh", str(script)) is None  # an override that is not executable


def test_a_grandchild_that_ignores_sigterm_is_killed_with_the_group_at_the_deadline(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    grandchild = ("import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                  "open(%r, 'w').write(str(os.getpid())); time.sleep(120)" % str(pid_file))
    # The child starts the grandchild and waits on it; both share the child's new process group.
    child = "import subprocess, sys; subprocess.call([sys.executable, '-c', %r])" % grandchild
    start = time.monotonic()
    with pytest.raises(ProbeError, match="timed out after 1.5s"):
        command.run([sys.executable, "-c", child], 1.5)
    assert time.monotonic() - start < 15
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the grandchild outlived the deadline")


def test_call_with_timeout():
    assert command.call_with_timeout(lambda: 7, 5, "seven") == 7
    with pytest.raises(ProbeError, match="sleeper timed out after 0.2s"):
        command.call_with_timeout(lambda: time.sleep(3), 0.2, "sleeper")
    with pytest.raises(ZeroDivisionError):
        command.call_with_timeout(lambda: 1 // 0, 5, "division")

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


def _escape_script(pid_file):
    """Python code that leaves the process group with setsid(2), writes its pid, and sleeps."""
    return ("import os; os.setsid(); open(%r, 'w').write(str(os.getpid())); os.execvp('sleep', ['sleep', '600'])"
            % str(pid_file))


def _wait_gone(pid):
    """True once no process (not even a zombie) has this pid; kills it and returns False if it stays."""
    for _unused in range(200):
        if not os.path.exists("/proc/%d" % pid):
            return True
        time.sleep(0.01)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux")
def test_a_setsid_grandchild_under_a_live_parent_is_killed_at_the_deadline(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    script = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', %r]); time.sleep(600)" % _escape_script(pid_file)
    with pytest.raises(ProbeError, match="timed out after 1s"):
        command.run([sys.executable, "-c", script], 1)
    assert _wait_gone(int(pid_file.read_text())), "the setsid'd grandchild survived"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux")
def test_an_orphaned_setsid_grandchild_is_adopted_and_killed_at_the_deadline(tmp_path):
    # The intermediate process exits at once: the grandchild is an orphan in its own session, which only the
    # subreaper can still find (without it, init would adopt it and it would hold the pipes open for ever).
    pid_file = tmp_path / "grandchild.pid"
    script = ("( '%s' -c \"%s\" & ); while [ ! -s '%s' ]; do sleep 0.01; done; exec sleep 600"
              % (sys.executable, _escape_script(pid_file), pid_file))
    with pytest.raises(ProbeError, match="timed out after 1s"):
        command.run(["sh", "-c", script], 1)
    assert command.become_subreaper()
    assert _wait_gone(int(pid_file.read_text())), "the orphaned grandchild survived"


def test_the_process_table_and_descendants(tmp_path):
    table = command.process_table()
    me = os.getpid()
    assert table[me][1] == os.getppid()
    fake = {10: ("S", 1, 10, 10, 5), 11: ("S", 10, 10, 10, 6), 12: ("S", 11, 12, 12, 7), 13: ("S", 1, 13, 13, 1),
            14: ("S", me, 14, 14, 8), 15: ("S", me, 15, 15, 2)}
    # 11 and 12 below 10 (12 left with setsid), 14 adopted after 10 started; 13 unrelated, 15 older than 10
    assert command.descendants(10, fake) == {10, 11, 12, 14}
    assert command.process_table(str(tmp_path / "no-proc")) == {}


def test_proc_pid_stat_is_read_after_the_command_name():
    # The one /proc/<pid>/stat parser (the process table, tenant.slo's process start times): this process's real
    # stat, then copies with a command name holding spaces and parentheses, truncated, and not numbers.
    with open("/proc/self/stat") as handle:
        real = handle.read()
    state, ppid, pgrp, session, start = command.parse_pid_stat(real)
    assert (ppid, pgrp, session) == (os.getppid(), os.getpgrp(), os.getsid(0)) and state in "RS" and start > 0
    head, _paren, tail = real.rpartition(")")
    assert command.parse_pid_stat(head.split(" (")[0] + " (a) b (c ) d)" + tail) == (state, ppid, pgrp, session, start)
    assert command.parse_pid_stat(real[:real.index(")")]) is None  # truncated inside the name
    assert command.parse_pid_stat(head + ")" + tail.replace(" %d " % ppid, " x ", 1)) is None
    assert command.parse_pid_stat(head + ") S 1 2") is None


def test_signal_group_signals_the_group_and_says_when_none_is_left():
    import subprocess  # pylint: disable=import-outside-toplevel
    group = subprocess.Popen(["sleep", "30"], start_new_session=True)  # its own process group, as command.run's
    try:
        assert command.signal_group(group.pid, signal.SIGTERM)
        assert group.wait(timeout=10) == -signal.SIGTERM
    finally:
        command.signal_group(group.pid)
    assert not command.signal_group(group.pid)  # reaped: no such group

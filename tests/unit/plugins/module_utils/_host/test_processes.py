"""The process table: this machine's own processes, and a laid-out /proc with a process that vanished."""

import os
import pwd

from ansible_collections.continuum.hydra.plugins.module_utils._host.processes import list_processes


def test_this_process_is_listed_with_its_command_and_user():
    me = [p for p in list_processes() if p["pid"] == os.getpid()]
    with open("/proc/self/comm") as handle:
        comm = handle.read().strip()
    assert me == [{"pid": os.getpid(), "comm": comm, "uid": os.getuid(), "user": pwd.getpwuid(os.getuid()).pw_name}]


def test_a_vanished_process_and_an_unknown_uid_on_a_laid_out_tree(tmp_path):
    (tmp_path / "self").mkdir()  # not a PID: skipped
    (tmp_path / "41").mkdir()  # exited between listdir and the read of comm: skipped
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "comm").write_text("python3\n")
    rows = list_processes(str(tmp_path))
    uid = os.stat(str(tmp_path / "42")).st_uid
    assert [row["pid"] for row in rows] == [42] and rows[0]["comm"] == "python3" and rows[0]["uid"] == uid


# ---- per-process readers (tenant.slo) -----------------------------------------------------------------------

def test_per_process_readers_on_a_real_child_process():
    import subprocess
    import time

    from ansible_collections.continuum.hydra.plugins.module_utils._host import processes
    child = subprocess.Popen(["sleep", "30"])
    try:
        start = processes.stat_starttime(child.pid)
        with open("/proc/%d/stat" % child.pid) as handle:
            assert start == int(handle.read().rsplit(")", 1)[1].split()[19])
        for _attempt in range(100):  # the exec may not have shown in /proc yet
            if processes.cmdline(child.pid) == "sleep 30":
                break
            time.sleep(0.01)
        assert processes.cmdline(child.pid) == "sleep 30"
        groups = processes.cgroups(child.pid)
        assert groups and all(path.startswith("/") for path in groups.values())
        counters = processes.io_counters(child.pid)
        assert set(("rchar", "wchar", "read_bytes", "write_bytes")) <= set(counters)
        assert processes.boot_time() > 1e9
    finally:
        child.kill()
        child.wait()
    # Gone: every reader says None, none raises.
    assert processes.stat_starttime(child.pid) is None and processes.cmdline(child.pid) is None
    assert processes.cgroups(child.pid) is None and processes.io_counters(child.pid) is None


def test_stat_with_a_command_name_holding_spaces_and_parentheses(tmp_path):
    from ansible_collections.continuum.hydra.plugins.module_utils._host import processes
    (tmp_path / "7").mkdir()
    fields = ["S"] + [str(n) for n in range(1, 19)] + ["987654"] + ["0"] * 30
    (tmp_path / "7" / "stat").write_text("7 (evil ) 1 2 (x) %s\n" % " ".join(fields))
    assert processes.stat_starttime(7, str(tmp_path)) == 987654
    (tmp_path / "7" / "stat").write_text("7 (truncated")
    assert processes.stat_starttime(7, str(tmp_path)) is None

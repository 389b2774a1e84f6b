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

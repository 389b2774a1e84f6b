"""Recorded host trees (tests/fixtures/hosts) laid out under a temp root, and ways to plant faults in them."""

import json
import os
import shutil

from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path, read_fixture

HOST = "debian12-vm"
OPTIONS = {"timeouts": {"command": 10, "torch": 90}, "expect": {}}
GIB = 2 ** 30


def copy_host_tree(root, name=HOST):
    """The recorded host's files under root (a copy the test may edit)."""
    shutil.copytree(fixture_path("hosts", name), str(root), dirs_exist_ok=True)
    return root


def lay_out_dump(root, fixture):
    """Files of a `grep -r .` style dump (PATH:VALUE lines) created under root."""
    for line in read_fixture(fixture).splitlines():
        path, value = line.split(":", 1)
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(value + "\n")
    return root


def recorded_statvfs(name, **edits):
    """os.statvfs_result recorded on this machine, with fields replaced (f_blocks=..., f_bavail=...)."""
    values = json.loads(read_fixture("hosts", HOST, "cmd", name))["statvfs"]
    fields = ["f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_favail", "f_flag", "f_namemax"]
    for key, value in edits.items():
        values[fields.index(key)] = value
    return os.statvfs_result(values)


def edit(path, old, new):
    text = path.read_text()
    assert old in text, "%s does not contain %r" % (path, old)
    path.write_text(text.replace(old, new))


def v2_tree(root):
    """The recorded hybrid host turned into a pure cgroup v2 host by editing copies of its files."""
    copy_host_tree(root)
    mountinfo = root / "proc/self/mountinfo"
    lines = [line for line in mountinfo.read_text().splitlines() if " - cgroup cgroup " not in line]
    mountinfo.write_text("\n".join(line.replace("/sys/fs/cgroup/unified", "/sys/fs/cgroup") for line in lines) + "\n")
    (root / "proc/self/cgroup").write_text("0::/system.slice/train.service\n")
    shutil.rmtree(str(root / "sys/fs/cgroup"))
    (root / "sys/fs/cgroup/system.slice/train.service").mkdir(parents=True)
    recorded = read_fixture("hosts", HOST, "sys/fs/cgroup/unified/cgroup.controllers")
    assert recorded.split() == ["hugetlb"]
    (root / "sys/fs/cgroup/cgroup.controllers").write_text(recorded.replace("hugetlb", "cpuset cpu io memory hugetlb pids rdma misc"))
    (root / "sys/fs/cgroup/system.slice/train.service/cgroup.controllers").write_text(
        recorded.replace("hugetlb", "cpu io memory pids"))
    return root / "sys/fs/cgroup/system.slice/train.service"

"""A real hung mount, for the tests of what the collection does when a state directory stops answering.

``command(mountpoint, argv)`` runs ``argv`` in a private mount namespace (``unshare --mount``: no other process on the
machine sees the mount) in which ``mountpoint`` is a FUSE file system that never answers: this file, run as a
script, opens /dev/fuse, mounts it there with mount(2) and never reads the device, so the kernel's first request
(FUSE_INIT) is never answered and every later call under the mount point - stat, mkdir, open, listdir - blocks in
the kernel, as on an NFS server gone away. When ``argv`` has ended, the script exits: the device is closed, which
aborts the connection, and the namespace goes with it. Needs root and /dev/fuse (``available()`` says why not).

Run as a script (standard library only): ``hung_mount.py MOUNTPOINT -- ARGV...``; its exit status is ARGV's.
"""

import ctypes
import os
import shutil
import subprocess
import sys

_SELF = os.path.abspath(__file__)


def available():
    """None when a hung mount can be made here, else why not (one line)."""
    if os.geteuid() != 0:
        return "a FUSE mount needs root"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if not shutil.which("unshare"):
        return "no unshare (util-linux)"
    return None


def command(mountpoint, argv):
    """The argument list that runs ``argv`` with ``mountpoint`` hung (created first when missing)."""
    os.makedirs(mountpoint, exist_ok=True)
    return ["unshare", "--mount", "--propagation", "private", sys.executable, _SELF, mountpoint, "--"] + list(argv)


def _main(args):
    mountpoint, separator, argv = args[0], args[1], args[2:]
    if separator != "--" or not argv:
        sys.exit("usage: hung_mount.py MOUNTPOINT -- ARGV...")
    device = os.open("/dev/fuse", os.O_RDWR)  # kept open, never read, until argv has ended
    options = "fd=%d,rootmode=40000,user_id=0,group_id=0" % device
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"hydra-hung", mountpoint.encode(), b"fuse", 0, options.encode()) != 0:
        sys.exit("mount %s: %s" % (mountpoint, os.strerror(ctypes.get_errno())))
    sys.exit(subprocess.run(argv, check=False).returncode)


if __name__ == "__main__":
    _main(sys.argv[1:])

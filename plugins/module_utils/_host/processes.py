# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The process table from /proc: who runs what, for the features that act on processes.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import pwd
from typing import Any

from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text_or_none


def list_processes(proc: str = "/proc") -> list[dict[str, Any]]:
    """Every process as {pid, comm, uid, user}; one that exits while being read is left out."""
    out = []
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        comm = read_text_or_none(os.path.join(proc, name, "comm"))
        try:
            uid = os.stat(os.path.join(proc, name)).st_uid
        except OSError:
            continue  # gone meanwhile
        if comm is None:
            continue
        try:
            user = pwd.getpwuid(uid).pw_name
        except KeyError:
            user = str(uid)  # no passwd entry (a container's UID): the number is the name
        out.append({"pid": int(name), "comm": comm.strip(), "uid": uid, "user": user})
    return out

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build a node-local program as a zipapp: the collection's plugins/module_utils tree and an entry point.

    python _zipapp.py MAIN_PY OUTPUT

Run on the Ansible controller by the roles that install such a program (slurm_healthcheck: hydra-healthcheck.pyz,
tenant_guard: hydra-tenant-guard.pyz), each with the entry point in its own files/. The tree is the one beside this
file (../module_utils). The archive is byte-for-byte the same for the same sources (sorted entries, fixed timestamps
and modes, no __pycache__), so the copy to the nodes is idempotent. Inside, the tree sits under
ansible_collections/continuum/hydra/plugins/module_utils, where its imports expect it.
"""

import os
import sys
import zipfile

PACKAGE = ("ansible_collections", "continuum", "hydra", "plugins")
STAMP = (1980, 1, 1, 0, 0, 0)
MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")


def entries(module_utils: str) -> dict[str, bytes]:
    out = {}
    for index in range(len(PACKAGE)):
        out["/".join(PACKAGE[:index + 1]) + "/__init__.py"] = b""
    for directory, subdirs, files in os.walk(module_utils):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, module_utils).replace(os.sep, "/")
            with open(path, "rb") as handle:
                out["/".join(PACKAGE) + "/module_utils/" + relative] = handle.read()
    return out


def build(main_py: str, output: str) -> None:
    files = entries(MODULE_UTILS)
    with open(main_py, "rb") as handle:
        files["__main__.py"] = handle.read()
    tmp = output + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, STAMP)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, files[name])
    os.replace(tmp, output)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: _zipapp.py MAIN_PY OUTPUT")
    build(*sys.argv[1:])

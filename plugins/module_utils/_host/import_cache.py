# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""This collection's code compiled once per host and Python, not twice per module run.

AnsiballZ ships a module and its module_utils as Python source in a zip, and CPython's zipimport compiles
each module it imports twice (once to name the spec's origin, once to run it) and keeps neither. doctor
imports about 0.5 MB of source: ~0.17 CPU-s of every run, more than all its probes together on a host
without GPUs.

install() puts a finder for ``ansible_collections.continuum.hydra.*`` first on sys.meta_path. It reads
each module's source from the payload zip once and compiles it once; the code object is kept in a
per-user cache (``$XDG_CACHE_HOME/continuum-hydra/bytecode``, else ``~/.cache/...``; the directory must be
the user's own and not writable by others, and so must every directory above it, up to ``/``: each belongs to this
user or root, and none is writable by others unless sticky like ``/tmp`` - whoever may rename a parent may swap the
cache for one of their own), named by a SHA-256 of the interpreter's bytecode magic, the
module name and the source, so the next run on the host, of the same collection version, loads it. The
cache is not written when Python is told not to write bytecode (``PYTHONDONTWRITEBYTECODE``, ``-B``), and
entries unused for CACHE_MAX_AGE_S are removed when a new one is written. Anything unexpected (not run
from a zip, no usable cache directory, an entry that does not load) falls back to compiling: never an
error.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import hashlib
import importlib.machinery
import importlib.util
import marshal
import os
import stat
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping
from typing import Any, Optional

PREFIX = "ansible_collections.continuum.hydra."
CACHE_MAX_AGE_S = 30 * 24 * 3600
CACHE_SUBDIR = os.path.join("continuum-hydra", "bytecode")


def cache_dir(environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The per-user cache directory, created 0700; None when it cannot be made or is not safely ours."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, CACHE_SUBDIR)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.stat(path)
    except OSError:
        return None
    # Code loaded from here runs as this user: a directory someone else could write into is not used.
    if info.st_uid != os.getuid() or info.st_mode & 0o022 or not _trusted_parents(path):
        return None
    return path


def _trusted_parents(path: str) -> bool:
    """Whether every directory above ``path`` (as given, and with symbolic links resolved) belongs to this user or
    root and is not writable by others unless sticky: no one else can rename the cache, or a parent, away."""
    uid = os.getuid()
    for start in (os.path.abspath(path), os.path.realpath(path)):
        current = os.path.dirname(start)
        while True:
            try:
                info = os.lstat(current)
            except OSError:
                return False
            if info.st_uid not in (0, uid):
                return False
            if not stat.S_ISLNK(info.st_mode) and info.st_mode & 0o002 and not info.st_mode & stat.S_ISVTX:
                return False
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
    return True


class CachedSourceLoader(importlib.machinery.SourceFileLoader):
    """Loads one module of the payload zip: its cached code object, else its source compiled once."""

    def __init__(self, fullname: str, origin: str, archive: zipfile.ZipFile, member: str, cache: Optional[str]) -> None:
        super().__init__(fullname, origin)
        self._archive, self._member, self._cache = archive, member, cache

    def get_data(self, path: str) -> bytes:
        return self._archive.read(self._member)

    def get_code(self, fullname: str) -> Any:
        source = self.get_data(self.path)
        if self._cache is None:
            return compile(source, self.path, "exec", dont_inherit=True)
        digest = hashlib.sha256(importlib.util.MAGIC_NUMBER + fullname.encode() + b"\0" + source).hexdigest()
        entry = os.path.join(self._cache, digest)
        try:
            with open(entry, "rb") as handle:
                return marshal.loads(handle.read())
        except (OSError, ValueError, EOFError, TypeError):
            pass
        code = compile(source, self.path, "exec", dont_inherit=True)
        if not sys.dont_write_bytecode:
            _store(self._cache, entry, marshal.dumps(code))
        return code


def _store(cache: str, entry: str, data: bytes) -> None:
    """Write one entry atomically, and drop the entries not written for CACHE_MAX_AGE_S (an upgrade's leftovers)."""
    try:
        handle, temporary = tempfile.mkstemp(dir=cache, prefix=".tmp-")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, entry)
        horizon = time.time() - CACHE_MAX_AGE_S
        for name in os.listdir(cache):
            path = os.path.join(cache, name)
            if os.stat(path).st_mtime < horizon:
                os.remove(path)
    except OSError:
        return


class PayloadFinder:
    """Finds this collection's modules in the AnsiballZ payload zip, for CachedSourceLoader."""

    def __init__(self, archive_path: str, cache: Optional[str]) -> None:
        self._path = archive_path
        self._archive = zipfile.ZipFile(archive_path)
        self._members = set(self._archive.namelist())
        self._cache = cache

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Optional[importlib.machinery.ModuleSpec]:
        if not fullname.startswith(PREFIX):
            return None
        base = fullname.replace(".", "/")
        for member, package in ((base + "/__init__.py", True), (base + ".py", False)):
            if member in self._members:
                origin = os.path.join(self._path, member)
                loader = CachedSourceLoader(fullname, origin, self._archive, member, self._cache)
                return importlib.util.spec_from_file_location(
                    fullname, origin, loader=loader,
                    submodule_search_locations=[os.path.join(self._path, base)] if package else None)
        return None

    def invalidate_caches(self) -> None:
        return None


def install(archive_path: Optional[str] = None) -> bool:
    """Put a PayloadFinder for ``archive_path`` (default: the zip this module came from) first on sys.meta_path.

    Modules already imported stay as they are: call it before importing the feature's code. False, and nothing
    changed, when not run from a zip (a checkout, the tests) or when a finder is already there.
    """
    archive_path = archive_path or getattr(getattr(sys.modules[__name__], "__loader__", None), "archive", None)
    if not archive_path or any(isinstance(finder, PayloadFinder) for finder in sys.meta_path):
        return False
    try:
        sys.meta_path.insert(0, PayloadFinder(archive_path, cache_dir()))
    except (OSError, zipfile.BadZipFile):
        return False
    return True

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""cgroup limits: v2 first (memory.max/high, cpu.max, io.max), v1 as fallback (memory.limit_in_bytes,
cpu.cfs_quota_us, blkio.throttle.*), under a configurable cgroup root.

The plan is a list of file writes, each with the value read before; the CgroupLimitsWorker at the end (which
the cgroup_limits_apply module hands to the remediation lifecycle, apply.run) performs them and reads them back.
Reading goes through a `read(path) -> str or None` callable so the logic runs the same on /sys/fs/cgroup and on
a tree laid out like it.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import errno
import os
import re
from typing import Any, Callable, Optional, Union

from ansible_collections.continuum.hydra.plugins.module_utils._host.cgroupfs import parse_limit
from ansible_collections.continuum.hydra.plugins.module_utils._host.files import read_text_or_none
from ansible_collections.continuum.hydra.plugins.module_utils._host.processes import list_processes
from ansible_collections.continuum.hydra.plugins.module_utils._remediate.apply import Failure, Worker

Entry = dict[str, Any]  # normalize_entry(): one limits entry, validated
Write = dict[str, Any]  # plan_limits(): {path, before, write, expect, what}
Action = dict[str, Any]  # plan(): a mkdir, write or move
Reader = Callable[[str], Optional[str]]  # read(path relative to the root) -> text, or None when unreadable
Size = Union[int, str]  # bytes, or MAX

V1 = "v1"
V2 = "v2"
MAX = "max"
CPU_PERIOD_US = 100000
PAGE = 4096
IO_KEYS = ("rbps", "wbps", "riops", "wiops")
V1_IO_FILES = {"rbps": "blkio.throttle.read_bps_device", "wbps": "blkio.throttle.write_bps_device",
               "riops": "blkio.throttle.read_iops_device", "wiops": "blkio.throttle.write_iops_device"}
LIMIT_KEYS = ("memory_max", "memory_high", "cpu_percent", "io_max")
ENTRY_KEYS = ("name", "cgroup", "processes", "pids", "users") + LIMIT_KEYS
SEVERITIES = ("warn", "fail")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.I)
_DEVICE = re.compile(r"^\d+:\d+$")
_NAME = re.compile(r"^[A-Za-z0-9_.@-]+$")


class CgroupError(ValueError):
    """Bad input or an unusable cgroup tree: one line naming the value and what is accepted."""


def detect_version(root: str, wanted: str = "auto") -> str:
    """v2 when the root is a cgroup2 mount (cgroup.controllers at its top), v1 when it holds per-controller dirs."""
    if wanted in (V1, V2):
        return wanted
    if wanted != "auto":
        raise CgroupError("version: %r is not one of auto, v1, v2" % (wanted,))
    if os.path.isfile(os.path.join(root, "cgroup.controllers")):
        return V2
    if os.path.isdir(os.path.join(root, "memory")) or os.path.isdir(os.path.join(root, "cpu")):
        return V1
    raise CgroupError("cgroup root %s is neither cgroup v2 (no cgroup.controllers) nor v1 (no memory/ or cpu/)" % root)


def parse_size(value: Any, what: str) -> Size:
    """Bytes from an int, '512M', '2G', '1.5G' or 'max'."""
    if isinstance(value, bool):
        raise CgroupError("%s: %r is not a size (bytes, or a number with K/M/G/T, or 'max')" % (what, value))
    if isinstance(value, int):
        if value <= 0:
            raise CgroupError("%s: %r is not a positive size" % (what, value))
        return value
    text = str(value).strip()
    if text.lower() == MAX:
        return MAX
    match = _SIZE.match(text)
    if not match:
        raise CgroupError("%s: %r is not a size (bytes, or a number with K/M/G/T, or 'max')" % (what, value))
    size = int(float(match.group(1)) * 1024 ** " KMGT".index(match.group(2).upper() or " "))
    if size <= 0:
        raise CgroupError("%s: %r is not a positive size" % (what, value))
    return size


def device_number(device: Any) -> str:
    """'MAJ:MIN' from 'MAJ:MIN' or a block device path."""
    text = str(device)
    if _DEVICE.match(text):
        return text
    try:
        st = os.stat(text)
    except OSError:
        raise CgroupError("io_max.device: %r is neither MAJ:MIN nor an existing block device" % (device,)) from None
    return "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))


def normalize_entry(entry: Any, index: int = 0) -> Entry:
    """One limits entry validated, sizes in bytes, devices as MAJ:MIN."""
    where = "limits[%d]" % index
    if not isinstance(entry, dict):
        raise CgroupError("%s: %r is not a mapping" % (where, entry))
    unknown = sorted(set(entry) - set(ENTRY_KEYS))
    if unknown:
        raise CgroupError("%s: unknown key %r; accepted: %s" % (where, unknown[0], ", ".join(ENTRY_KEYS)))
    name, cgroup = entry.get("name"), entry.get("cgroup")
    if bool(name) == bool(cgroup):
        raise CgroupError("%s: give exactly one of name (a group hydra creates) or cgroup (an existing cgroup path)" % where)
    if name and not _NAME.match(str(name)):
        raise CgroupError("%s.name: %r may hold only letters, digits and _ . @ -" % (where, name))
    if cgroup and (str(cgroup).startswith("/") or ".." in str(cgroup).split("/")):
        raise CgroupError("%s.cgroup: %r must be a path relative to the cgroup root, without '..'" % (where, cgroup))
    out = {"name": name, "cgroup": cgroup, "processes": list(entry.get("processes") or []),
           "pids": [int(p) for p in entry.get("pids") or []], "users": [str(u) for u in entry.get("users") or []]}
    for key in ("memory_max", "memory_high"):
        out[key] = parse_size(entry[key], "%s.%s" % (where, key)) if entry.get(key) is not None else None
    out["cpu_percent"] = _cpu_percent(entry.get("cpu_percent"), where)
    io = []
    for rule in entry.get("io_max") or []:
        if not isinstance(rule, dict) or "device" not in rule or not set(rule) - {"device"} <= set(IO_KEYS) or len(rule) < 2:
            raise CgroupError("%s.io_max: %r must be {device, and some of %s}" % (where, rule, ", ".join(IO_KEYS)))
        limits: dict[str, Size] = {}
        for key in IO_KEYS:
            if key in rule:
                value = rule[key]
                if isinstance(value, str) and value.lower() == MAX:
                    limits[key] = MAX
                elif isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    limits[key] = value
                else:
                    raise CgroupError("%s.io_max.%s: %r is not a positive whole number or 'max'" % (where, key, value))
        io.append({"device": device_number(rule["device"]), "limits": limits})
    out["io_max"] = io
    if not any(out[k] for k in LIMIT_KEYS) and not (out["processes"] or out["pids"] or out["users"]):
        raise CgroupError("%s: sets no limit (%s) and moves no process" % (where, ", ".join(LIMIT_KEYS)))
    return out


def _cpu_percent(value: Any, where: str) -> Union[float, str, None]:
    """A positive percentage of one CPU (numbers or numeric text), 'max', or None."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() == MAX:
        return MAX
    try:
        number = float(value) if not isinstance(value, bool) else 0
    except ValueError:
        number = 0
    if number <= 0:
        raise CgroupError("%s.cpu_percent: %r is not a positive percentage of one CPU (100 = one CPU) or 'max'" % (where, value))
    return number


def group_path(entry: Entry, parent: str) -> str:
    return entry["cgroup"] or "%s/%s" % (parent.strip("/"), entry["name"])


def controllers_for(entry: Entry) -> list[str]:
    needed = []
    if entry["cpu_percent"] is not None:
        needed.append("cpu")
    if entry["io_max"]:
        needed.append("io")
    if entry["memory_max"] is not None or entry["memory_high"] is not None:
        needed.append("memory")
    return needed


def _v1_dir(controller: str) -> str:
    return {"io": "blkio"}.get(controller, controller)


# ---- reading current values -------------------------------------------------------------------------------

def _size(text: Optional[str]) -> Size:
    """A limit file's value as planned and verified (_host/cgroupfs.py): a number, MAX for no limit or nothing read."""
    value = parse_limit(text) if text and text.strip() else None
    return MAX if value is None else value


def parse_v2_io_max(text: Optional[str]) -> dict[str, dict[str, Size]]:
    """io.max -> {"MAJ:MIN": {"rbps": int|'max', ...}}."""
    out = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if not parts:
            continue
        out[parts[0]] = dict((k, MAX if v == MAX else int(v)) for k, v in (p.split("=", 1) for p in parts[1:] if "=" in p))
    return out


def parse_v1_throttle(text: Optional[str]) -> dict[str, int]:
    """blkio.throttle.*_device -> {"MAJ:MIN": int}."""
    out = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and _DEVICE.match(parts[0]):
            out[parts[0]] = int(parts[1])
    return out


def cpu_quota(percent: Union[float, str]) -> Size:
    if isinstance(percent, str):  # MAX: _cpu_percent() lets no other text through
        return MAX
    return int(round(CPU_PERIOD_US * percent / 100.0))


def plan_limits(entry: Entry, version: str, parent: str, read: Reader) -> list[Write]:
    """File writes that bring one entry's limits in place: [{path, before, write, expect, what}].

    `path` is relative to the cgroup root; `before`/`expect` are the comparable values read / wanted,
    `write` is the text written. Sizes are compared page-aligned under v1, as the kernel stores them.
    """
    group = group_path(entry, parent)
    writes = []

    def want(path: str, before: Any, write: str, expect: Any, what: str) -> None:
        if before != expect:
            writes.append({"path": path, "before": before, "write": write, "expect": expect, "what": what})

    if version == V2:
        if entry["memory_max"] is not None:
            want(group + "/memory.max", _size(read(group + "/memory.max")), str(entry["memory_max"]), entry["memory_max"],
                 "memory.max")
        if entry["memory_high"] is not None:
            want(group + "/memory.high", _size(read(group + "/memory.high")), str(entry["memory_high"]),
                 entry["memory_high"], "memory.high")
        if entry["cpu_percent"] is not None:
            current = (read(group + "/cpu.max") or "max %d" % CPU_PERIOD_US).split()
            value = "%s %d" % (cpu_quota(entry["cpu_percent"]), CPU_PERIOD_US)
            want(group + "/cpu.max", " ".join(current[:2]), value, value, "cpu.max")
        if entry["io_max"]:
            io_current = parse_v2_io_max(read(group + "/io.max"))
            for rule in entry["io_max"]:
                before = dict((k, io_current.get(rule["device"], {}).get(k, MAX)) for k in rule["limits"])
                text = "%s %s" % (rule["device"], " ".join("%s=%s" % (k, rule["limits"][k]) for k in IO_KEYS if k in rule["limits"]))
                want(group + "/io.max", {rule["device"]: before}, text, {rule["device"]: dict(rule["limits"])},
                     "io.max %s" % rule["device"])
        return writes

    def page(value: Size) -> Size:
        return value if isinstance(value, str) else value // PAGE * PAGE  # a str is MAX

    if entry["memory_max"] is not None:
        path = "memory/%s/memory.limit_in_bytes" % group
        want(path, _size(read(path)), "-1" if entry["memory_max"] == MAX else str(entry["memory_max"]),
             page(entry["memory_max"]), "memory.limit_in_bytes")
    if entry["memory_high"] is not None:
        # v1 has no memory.high; the soft limit is its nearest equivalent (reclaimed first under pressure).
        path = "memory/%s/memory.soft_limit_in_bytes" % group
        want(path, _size(read(path)), "-1" if entry["memory_high"] == MAX else str(entry["memory_high"]),
             page(entry["memory_high"]), "memory.soft_limit_in_bytes")
    if entry["cpu_percent"] is not None:
        period_path = "cpu/%s/cpu.cfs_period_us" % group
        want(period_path, int((read(period_path) or str(CPU_PERIOD_US)).strip()), str(CPU_PERIOD_US), CPU_PERIOD_US,
             "cpu.cfs_period_us")
        path = "cpu/%s/cpu.cfs_quota_us" % group
        quota = cpu_quota(entry["cpu_percent"])
        want(path, _size(read(path)), "-1" if quota == MAX else str(quota), quota, "cpu.cfs_quota_us")
    for rule in entry["io_max"]:
        for key, value in sorted(rule["limits"].items()):
            path = "blkio/%s/%s" % (group, V1_IO_FILES[key])
            throttle: Size = parse_v1_throttle(read(path)).get(rule["device"], MAX)
            # Writing 0 removes a v1 throttle rule: that is "max".
            want(path, throttle, "%s %s" % (rule["device"], 0 if value == MAX else value), value,
                 "%s %s" % (V1_IO_FILES[key], rule["device"]))
    return writes


def read_back(write: Write, version: str, read: Reader) -> Any:
    """The comparable value of one planned write, read again (for verification)."""
    path, what = write["path"], write["what"]
    if version == V2:
        if what in ("memory.max", "memory.high"):
            return _size(read(path))
        if what == "cpu.max":
            return " ".join((read(path) or "").split()[:2])
        device = what.split()[1]
        current = parse_v2_io_max(read(path)).get(device, {})
        return {device: dict((k, current.get(k, MAX)) for k in write["expect"][device])}
    if what == "cpu.cfs_period_us":
        return int((read(path) or "0").strip())
    if what.startswith("blkio."):
        return parse_v1_throttle(read(path)).get(what.split()[1], MAX)
    return _size(read(path))


def group_dirs(entry: Entry, version: str, parent: str) -> list[str]:
    """Directories (relative to the root) the entry's cgroup lives in, parents first."""
    group = group_path(entry, parent)
    if version == V2:
        parts = group.split("/")
        return ["/".join(parts[:i + 1]) for i in range(len(parts))]
    dirs: list[str] = []
    for controller in controllers_for(entry) or ["memory", "cpu"]:
        parts = group.split("/")
        dirs.extend("%s/%s" % (_v1_dir(controller), "/".join(parts[:i + 1])) for i in range(len(parts)))
    return dirs


def v2_subtree_writes(entries: list[Entry], parent: str, read: Reader) -> list[Write]:
    """cgroup.subtree_control writes enabling the entries' controllers from the root down to each group's parent.

    One write per directory, naming the union of what its descendants need: on a real cgroupfs '+x' adds and
    keeps the others, and writing all of them at once keeps a laid-out tree true as well.
    """
    needs: dict[str, list[str]] = {}
    order: list[str] = []
    for entry in entries:
        needed = controllers_for(entry)
        group = group_path(entry, parent).split("/")
        for ancestor in [""] + ["/".join(group[:i + 1]) for i in range(len(group) - 1)]:
            if ancestor not in needs:
                needs[ancestor] = []
                order.append(ancestor)
            needs[ancestor].extend(c for c in needed if c not in needs[ancestor])
    writes = []
    for ancestor in order:
        needed = sorted(needs[ancestor])
        if not needed:
            continue
        prefix = ancestor + "/" if ancestor else ""
        available = (read(prefix + "cgroup.controllers") or "").split()
        # A directory not made yet has no files: what it offers is checked at the root.
        if ancestor == "" or available:
            missing = [c for c in needed if c not in available]
            if missing:
                raise CgroupError("controller %s is not available in %s (cgroup.controllers: %s)" % (
                    missing[0], "/" + ancestor, " ".join(available) or "empty"))
        enabled = [c.lstrip("+") for c in (read(prefix + "cgroup.subtree_control") or "").split()]
        if any(c not in enabled for c in needed):
            writes.append({"path": prefix + "cgroup.subtree_control", "before": " ".join(enabled),
                           "write": " ".join("+" + c for c in needed), "expect": needed, "what": "cgroup.subtree_control"})
    return writes


def procs_files(entry: Entry, version: str, parent: str) -> list[str]:
    group = group_path(entry, parent)
    if version == V2:
        return [group + "/cgroup.procs"]
    return ["%s/%s/cgroup.procs" % (_v1_dir(c), group) for c in controllers_for(entry) or ["memory", "cpu"]]


def matching_pids(entry: Entry, processes: list[dict[str, Any]]) -> list[int]:
    """PIDs the entry moves: listed pids, processes by name (comm), processes of listed users (name or uid).

    processes: [{"pid", "comm", "uid", "user"}] as read from /proc.
    """
    wanted = set(entry["pids"])
    users = set(entry["users"])
    for proc in processes:
        if proc["comm"] in entry["processes"] or str(proc["uid"]) in users or proc["user"] in users:
            wanted.add(proc["pid"])
    alive = set(p["pid"] for p in processes)
    return sorted(p for p in wanted if p in alive)


def limits_from_findings(findings: list[dict[str, Any]], severity_limits: Optional[dict[str, Any]],
                         parent_name: str = "noisy") -> list[dict[str, Any]]:
    """Cluster-Helper's tier 1: noisy processes a check found, limited by severity.

    findings: [{"pid": int, "name": str, "severity": "warn"|"fail"}]; severity_limits: {"warn": {limits}, "fail": {...}}.
    Returns limits entries, one group per severity present (e.g. noisy-fail), the harsher limits for 'fail'.
    """
    entries = []
    for severity in SEVERITIES:
        pids = sorted(set(int(f["pid"]) for f in findings if str(f.get("severity", "")).lower() == severity))
        if not pids:
            continue
        limits = (severity_limits or {}).get(severity)
        if not limits:
            raise CgroupError("severity_limits: no limits for severity %r (found processes %s)" % (
                severity, ", ".join(str(p) for p in pids)))
        entry = dict(limits)
        entry.update({"name": "%s-%s" % (parent_name, severity), "pids": pids})
        entries.append(entry)
    unknown = sorted(set(str(f.get("severity")) for f in findings) - set(SEVERITIES))
    if unknown:
        raise CgroupError("findings: severity %r is not one of %s" % (unknown[0], ", ".join(SEVERITIES)))
    return entries


# ---- the worker: the cgroup tree and /proc, for apply.run ---------------------------------------------------

class Tree:
    """Reads and writes under the cgroup root; every path is relative to it."""

    def __init__(self, root: str) -> None:
        self.root = root

    def path(self, rel: str) -> str:
        return os.path.join(self.root, rel)

    def read(self, rel: str) -> Optional[str]:
        return read_text_or_none(self.path(rel))

    def exists(self, rel: str) -> bool:
        return os.path.isdir(self.path(rel))

    def write(self, rel: str, text: str) -> None:
        # cgroup files take one value per write(2); no temp file and rename: cgroupfs has neither.
        with open(self.path(rel), "w") as handle:
            handle.write(text)

    def add_pid(self, rel: str, pid: int) -> None:
        # Like `echo PID >> cgroup.procs`: cgroupfs moves the process, a plain file (a laid-out tree) keeps a list.
        with open(self.path(rel), "a") as handle:
            handle.write("%d\n" % pid)

    def pids(self, rel: str) -> set[int]:
        return {int(p) for p in (self.read(rel) or "").split()}


def plan(tree: Tree, version: str, parent: str, entries: list[Entry]) -> tuple[list[Action], list[dict[str, Any]]]:
    """(actions, groups): mkdirs first (parents first), then controller enabling (v2), then limits and moves."""
    needs_procs = any(e["processes"] or e["users"] for e in entries)
    processes = list_processes() if needs_procs else [{"pid": p, "comm": "", "uid": -1, "user": ""}
                                                      for e in entries for p in e["pids"] if os.path.exists("/proc/%d" % p)]
    mkdirs: list[Action] = []
    rest: list[Action] = []
    groups = []
    for entry in entries:
        dirs = group_dirs(entry, version, parent)
        if entry["cgroup"]:
            missing = [d for d in dirs if not tree.exists(d)]
            if missing:
                raise CgroupError("cgroup %s does not exist (%s); name an existing cgroup or use name to create one"
                                  % (entry["cgroup"], tree.path(missing[-1])))
        mkdirs.extend({"action": "mkdir", "path": d} for d in dirs
                      if not tree.exists(d) and d not in [m["path"] for m in mkdirs])
        rest.extend(dict(w, action="write", after=w["expect"]) for w in plan_limits(entry, version, parent, tree.read))
        pids = matching_pids(entry, processes)
        for procs in procs_files(entry, version, parent):
            moving = [p for p in pids if p not in tree.pids(procs)]
            if moving:
                rest.append({"action": "move", "path": procs, "pids": moving})
        groups.append({"cgroup": group_path(entry, parent), "pids": pids})
    enable = []
    if version == V2:
        enable = [dict(w, action="write", after=w["expect"]) for w in v2_subtree_writes(entries, parent, tree.read)]
    return mkdirs + enable + rest, groups


def public(action: Action) -> dict[str, Any]:
    return {k: v for k, v in action.items() if k in ("action", "path", "before", "after", "pids")}


class CgroupLimitsWorker(Worker):
    """State: the cgroup tree (read on demand). Plan: {"actions": mkdir/write/move, "groups": what each entry holds}."""

    name = "cgroup_limits"
    errors = (CgroupError,)

    def __init__(self, module: Any) -> None:
        super().__init__(module)
        self.tree = Tree(self.params["root"])
        self.version = ""  # detected by plan()

    def read(self) -> Tree:
        return self.tree

    def plan(self, before: Tree) -> dict[str, Any]:
        params = self.params
        parent = params["parent"].strip("/")
        if not parent or ".." in parent.split("/"):
            raise CgroupError("parent: %r must be a path below the cgroup root, without '..'" % params["parent"])
        self.version = detect_version(params["root"], params["version"])
        raw = [{k: v for k, v in e.items() if v is not None} for e in params["limits"]]
        raw += limits_from_findings(params["noisy_processes"], params["severity_limits"])
        entries = [normalize_entry(e, i) for i, e in enumerate(raw)]
        actions, groups = plan(before, self.version, parent, entries)
        return {"actions": actions, "groups": groups}

    def changed(self, plan: dict[str, Any]) -> bool:
        return bool(plan["actions"])

    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        tree = self.tree
        for action in plan["actions"]:
            try:
                if action["action"] == "mkdir":
                    os.mkdir(tree.path(action["path"]))
                elif action["action"] == "write":
                    tree.write(action["path"], action["write"])
                else:
                    for pid in action["pids"]:
                        try:
                            tree.add_pid(action["path"], pid)
                        except OSError as exc:
                            if exc.errno != errno.ESRCH:  # a process that ended meanwhile needs no limit
                                raise
            except OSError as exc:
                raise Failure("cgroup_limits: %s %s failed: %s" % (action["action"], tree.path(action["path"]), exc.strerror or exc),
                              changed=True, diff=self.diff(plan, tree, tree), **self.result(plan, tree, tree, True)) from exc
        return plan

    def verify(self, done: dict[str, Any], after: Tree) -> list[str]:
        problems = []
        for action in done["actions"]:
            if action["action"] == "write" and action["what"] == "cgroup.subtree_control":
                enabled = [c.lstrip("+") for c in (after.read(action["path"]) or "").split()]
                if any(c not in enabled for c in action["expect"]):
                    problems.append("%s reads %r" % (action["path"], " ".join(enabled)))
            elif action["action"] == "write":
                read = read_back(action, self.version, after.read)
                if read != action["expect"]:
                    problems.append("%s reads %r, not %r" % (action["path"], read, action["expect"]))
            elif action["action"] == "move":
                alive = [p for p in action["pids"] if os.path.exists("/proc/%d" % p)]
                stray = [p for p in alive if p not in after.pids(action["path"])]
                if stray:
                    problems.append("%s does not hold PIDs %s" % (action["path"], ", ".join(str(p) for p in stray)))
        return problems

    def diff(self, plan: dict[str, Any], before: Tree, after: Tree) -> dict[str, Any]:
        """Per file the value before and after (per device for io.max and blkio), per directory, per PID move."""
        diff: dict[str, dict[str, Any]] = {"before": {}, "after": {}}
        for action in plan["actions"]:
            if action["action"] == "mkdir":
                diff["before"][action["path"]], diff["after"][action["path"]] = "(absent)", "(directory)"
            elif action["action"] == "write":
                # io.max and the blkio files hold one line per device: one diff key per device.
                key = action["path"] + (" " + action["what"].split()[1] if " " in action["what"] else "")
                diff["before"][key], diff["after"][key] = action["before"], action["after"]
            else:
                diff["before"][action["path"]], diff["after"][action["path"]] = "(PIDs not in it)", action["pids"]
        return diff

    def result(self, plan: dict[str, Any], before: Tree, after: Tree, applied: bool) -> dict[str, Any]:
        return {"version": self.version, "changes": [public(a) for a in plan["actions"]], "groups": plan["groups"]}

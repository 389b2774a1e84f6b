# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The one rank a host runs in a collective across hosts: join, agree on a backend, all-reduce a size sweep, report.

Rendezvous: rank 0 (the group's first host) listens on its inventory address, on any free port or the first
free one of ``port_range``, and writes ``port=N`` into ``port_file``; the playbook reads it there and launches the
other ranks with it. Every rank also listens for its left ring neighbour. A rank joins rank 0 by answering an
HMAC challenge under the run's token (wire.py), telling its ring port and what torch offers on it; rank 0 picks the
backend every rank supports (NCCL/RCCL with GPUs and torch, gloo with torch, else the standard-library TCP ring),
sends everyone the ring, waits until every rank has its two ring connections, and starts the sweep.

Deadlines: nothing waits without one. Rank 0 waits for joins until the join deadline; a rank that is not there
by then is ``missing`` ("did not join") and the group does not run. Each ring step has ``step_timeout``; the whole
run has ``run_timeout``. During the sweep rank 0 watches every rank's control connection: a rank whose
connection ends before its report, or that has not reported by the time the others have (plus a grace), is
``lost`` ("lost mid-collective"); rank 0 then tells every rank to abort, each closes its ring connections, and
rank 0 sends every rank the group's verdict - figures, or who was missing or lost.

Before the first round the playbook asks every host whether it is idle (``idle()``: _host/idle.py's guard, the same
as doctor's deep level and the workloads'); the planner leaves a busy host out of every round, so no rank loads it.

A rank's ``outcome`` (not a health status: the controller judges): ok, not_joined (this rank could not join),
peer_lost (another rank did not join or was lost: this one says nothing about itself), broken (this rank itself
failed: its address cannot be bound, the backend is not there, the run deadline passed).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import json
import os
import re
import selectors
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any, Callable, Optional

from ansible_collections.continuum.hydra.plugins.module_utils import _atomic
from ansible_collections.continuum.hydra.plugins.module_utils._fabric import ring as _ring
from ansible_collections.continuum.hydra.plugins.module_utils._fabric import torch_worker, wire
from ansible_collections.continuum.hydra.plugins.module_utils._host import idle as _idle
from ansible_collections.continuum.hydra.plugins.module_utils._host import network
from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import worker
from ansible_collections.continuum.hydra.plugins.module_utils._status import RANK_BROKEN, RANK_NOT_JOINED, RANK_OK, RANK_PEER_LOST, READ_OK

TCP = "tcp"
GLOO = "gloo"
NCCL = "nccl"
RCCL = "rccl"  # torch's "nccl" backend on a ROCm build
BACKENDS = ("auto", TCP, GLOO, NCCL)
# How long rank 0 still waits for the other reports once one rank failed or all but the silent ones reported.
REPORT_GRACE_S = 5.0
PROBE_TIMEOUT_S = 60.0
RUN_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # it names rank 0's port file


class FabricInputError(ValueError):
    """A bad option: one line naming the value and what is accepted."""


def bus_bandwidth(nbytes: int, seconds: float, world: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s, nccl-tests' definitions for all-reduce: algbw = bytes / time,
    busbw = algbw x 2(N-1)/N (the bytes each rank's link carries per byte reduced)."""
    algbw = nbytes / seconds / 1e9 if seconds > 0 else 0.0
    return algbw, algbw * 2.0 * (world - 1) / world


def group_rows(rows_by_rank: Mapping[int, list[dict[str, Any]]], world: int) -> list[dict[str, Any]]:
    """The group's figures per size: the slowest rank's time (a collective is as fast as its slowest rank),
    verified only when every rank's result was exact."""
    ranks = sorted(rows_by_rank)
    out = []
    for index, first in enumerate(rows_by_rank[ranks[0]]):
        seconds = max(rows_by_rank[r][index]["seconds"] for r in ranks)
        algbw, busbw = bus_bandwidth(first["bytes"], seconds, world)
        out.append({"bytes": first["bytes"], "time_us": _figure(seconds * 1e6), "algbw_gbps": _figure(algbw),
                    "busbw_gbps": _figure(busbw), "verified": all(rows_by_rank[r][index]["verified"] for r in ranks)})
    return out


def _figure(value: float) -> float:
    return float("%.6g" % value)  # six significant digits: enough for any comparison, no noise in the report


def validate(options: Mapping[str, Any]) -> None:
    """FabricInputError for the first bad option."""
    world, rank = options["world"], options["rank"]
    if world < 2:
        raise FabricInputError("world: %r is not a group size (2 or more ranks)" % (world,))
    if not 0 <= rank < world:
        raise FabricInputError("rank: %r is not between 0 and world - 1 (%d)" % (rank, world - 1))
    if options["backend"] not in BACKENDS:
        raise FabricInputError("backend: %r is not one of %s" % (options["backend"], ", ".join(BACKENDS)))
    sizes = options["sizes"]
    if not sizes or any(isinstance(s, bool) or not isinstance(s, int) or s < 4 or s % 4 for s in sizes):
        raise FabricInputError("sizes: %r is not a list of byte counts, each a multiple of 4 and at least 4" % (sizes,))
    for name in ("join_timeout", "step_timeout", "run_timeout"):
        if not options[name] or options[name] <= 0:
            raise FabricInputError("%s: %r is not a number of seconds above 0" % (name, options[name]))
    if options["run_timeout"] <= options["join_timeout"]:
        raise FabricInputError("run_timeout: %r must exceed join_timeout (%r)" % (options["run_timeout"], options["join_timeout"]))
    for name in ("iterations", "latency_iterations"):
        if options[name] < 1:
            raise FabricInputError("%s: %r is not a count of 1 or more" % (name, options[name]))
    if options["warmup"] < 0:
        raise FabricInputError("warmup: %r is not a count of 0 or more" % (options["warmup"],))
    if rank > 0 and not options.get("master_port"):
        raise FabricInputError("master_port: rank %d needs rank 0's port (rank 0 writes it into its port_file)" % rank)
    if rank == 0 and not options.get("port_file"):
        raise FabricInputError("port_file: rank 0 needs a file to write its port into")
    if not RUN_ID.match(str(options.get("run_id") or "")):
        raise FabricInputError("run_id: %r is not 1-64 letters, digits, '.', '_' or '-'" % (options.get("run_id"),))
    if not options.get("token") or len(options["token"]) < 16:
        raise FabricInputError("token: the run's token must have at least 16 characters")
    try:
        wire.parse_port_range(options.get("port_range"))
    except ValueError as exc:
        raise FabricInputError(str(exc)) from None


# ---------------------------------------------------------------- what torch offers here

def capabilities(backend: str, torch_python: Optional[str], deadline: float) -> dict[str, Any]:
    """This host's backends: the standard-library ring always; torch's when the interpreter has it."""
    caps: dict[str, Any] = {"tcp": True, "torch_version": None, "gloo": False, "nccl": False, "gpus": 0, "accelerator": None}
    if backend == TCP:
        return caps
    timeout = max(min(PROBE_TIMEOUT_S, deadline - time.monotonic()), 1.0)
    try:
        answer = worker.run_worker(torch_worker, {"mode": "probe"}, timeout, "torch probe", python=torch_python)
    except worker.WorkerError as exc:
        caps["torch_problem"] = str(exc)
        return caps
    if answer.get("status") != READ_OK:
        caps["torch_problem"] = answer.get("reason") or "torch is not importable"
        return caps
    caps.update(torch_version=answer.get("torch_version"), gloo=bool(answer.get("gloo")), nccl=bool(answer.get("nccl")),
                gpus=int(answer.get("gpus") or 0), accelerator=answer.get("accelerator"), device=answer.get("device"))
    return caps


def agree(requested: str, caps: Mapping[int, Mapping[str, Any]], hosts: Mapping[int, str]) -> tuple[Optional[str], str]:
    """(backend, why): the requested one if every rank has it, or with auto the best all have; (None, why) if none."""
    def lacking(name: str) -> list[str]:
        return [hosts[r] for r in sorted(caps) if not caps[r].get(name)]

    if requested == "auto":
        if not lacking(NCCL):
            return NCCL, "every rank has torch with NCCL and a GPU"
        if not lacking(GLOO):
            some_nccl = lacking(NCCL) and any(c.get("nccl") for c in caps.values())
            return GLOO, "every rank has torch with gloo%s" % (" (NCCL not on %s)" % ", ".join(lacking(NCCL)) if some_nccl else "")
        without = lacking(GLOO)
        return TCP, ("no torch on %s" % ", ".join(without[:5]) + (" +%d more" % (len(without) - 5) if len(without) > 5 else ""))
    missing = lacking(requested)
    if missing:
        return None, "backend %s requested, not available on %s" % (requested, ", ".join(missing))
    return requested, "requested"


# ---------------------------------------------------------------- the ring connections

def connect_ring(rank: int, world: int, peers: list[dict[str, Any]], listener: socket.socket, token: str, run_id: str,
                 deadline: float) -> tuple[socket.socket, socket.socket]:
    """(right, left): connect to the right neighbour's ring port and accept the left neighbour, both authenticated."""
    left_rank = (rank - 1) % world
    accepted: dict[str, Any] = {}

    def accept_left() -> None:
        rejected = 0
        while time.monotonic() < deadline:
            listener.settimeout(max(min(0.5, deadline - time.monotonic()), 0.01))
            try:
                sock, where = listener.accept()
            except socket.timeout:
                continue
            except OSError as exc:
                accepted["error"] = "ring listener failed: %s" % (exc.strerror or exc)
                return
            channel = wire.Channel(sock, "%s:%d" % where[:2])
            try:
                hello = wire.challenge(channel, token, run_id, "ring", deadline)
                if hello["rank"] != left_rank:
                    raise wire.ProtocolError("rank %r is not the left neighbour %d" % (hello["rank"], left_rank))
            except (wire.ProtocolError, wire.PeerClosed, wire.PeerSilent):
                rejected += 1
                channel.close()
                continue
            accepted["sock"] = sock
            return
        accepted["error"] = "left neighbour rank %d (%s) did not connect within the join deadline" % (left_rank, peers[left_rank]["host"])

    thread = threading.Thread(target=accept_left, name="hydra-fabric-accept", daemon=True)
    thread.start()
    right = peers[(rank + 1) % world]
    sock = wire.connect(right["address"], right["ring_port"], deadline)
    channel = wire.Channel(sock, right["host"])
    wire.answer(channel, token, run_id, "ring", rank, deadline)
    thread.join(max(deadline - time.monotonic(), 0) + 1)
    if "sock" not in accepted:
        wire.close_quietly(sock)
        raise wire.PeerSilent(accepted.get("error", "left neighbour did not connect"))
    return sock, accepted["sock"]


# ---------------------------------------------------------------- running the backend

class Abort:
    """Set when this rank must stop: another rank failed (rank 0 said so) or rank 0 is gone."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reason: Optional[str] = None
        self._hooks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def on_abort(self, hook: Callable[[], None]) -> None:
        with self._lock:
            self._hooks.append(hook)
            fire = self.event.is_set()
        if fire:
            hook()

    def set(self, reason: str) -> None:
        with self._lock:
            if self.event.is_set():
                return
            self.reason = reason
            self.event.set()
            hooks = list(self._hooks)
        for hook in hooks:
            hook()


def run_tcp(options: Mapping[str, Any], rank: int, world: int, right: socket.socket, left: socket.socket,
            abort: Abort, run_deadline: float) -> dict[str, Any]:
    reducer_name, reducer = _ring.pick_reducer(options.get("reducer") or None)
    ring = _ring.Ring(rank, world, right, left, reducer, options["step_timeout"])
    abort.on_abort(ring.interrupt)
    try:
        rows = _ring.sweep(ring, options["sizes"], options["iterations"], options["warmup"], options["seed"], run_deadline,
                           options["latency_iterations"])
    except _ring.RingFailed as exc:
        if abort.event.is_set():
            return {"outcome": RANK_PEER_LOST, "reason": abort.reason}
        side_rank = (rank - 1) % world if exc.side == "left" else (rank + 1) % world
        return {"outcome": RANK_PEER_LOST, "reason": "rank %d %s" % (side_rank, exc.reason), "suspect_rank": side_rank}
    except _ring.RunDeadline:
        return {"outcome": RANK_BROKEN, "reason": "the run deadline (run_timeout=%gs) passed during the sweep" % options["run_timeout"]}
    finally:
        ring.close()
    return {"outcome": RANK_OK, "rows": rows, "reducer": reducer_name}


class TorchRank:
    """The torch child of this rank: started, its store port read (rank 0), waited for with the run deadline."""

    def __init__(self, options: Mapping[str, Any], backend: str, rank: int, world: int, master_address: str, port: int,
                 run_deadline: float) -> None:
        args = {"mode": "run", "backend": backend, "rank": rank, "world": world, "address": master_address, "port": port,
                "sizes": options["sizes"], "iterations": options["iterations"], "warmup": options["warmup"],
                "latency_iterations": options["latency_iterations"],
                "timeout_s": max(min(options["step_timeout"] * 4, run_deadline - time.monotonic()), 1.0)}
        env = {}
        interface = network.interface_of_address(options["address"])
        if interface:
            # gloo and NCCL's bootstrap pick an interface by themselves (often the wrong one): the inventory address's.
            env = {"GLOO_SOCKET_IFNAME": interface, "NCCL_SOCKET_IFNAME": interface}
        self.proc = worker.start_worker(torch_worker, args, python=options.get("torch_python") or None, env=env)
        self.lines: list[str] = []
        self._got_line = threading.Event()
        self._reader = threading.Thread(target=self._read, name="hydra-fabric-torch", daemon=True)
        self._reader.start()
        self.stderr = b""

    def _read(self) -> None:
        stdout = self.proc.stdout
        if stdout is None:
            return
        for raw in stdout:
            self.lines.append(raw.decode("utf-8", "replace"))
            self._got_line.set()

    def store_port(self, deadline: float) -> int:
        while time.monotonic() < deadline:
            for line in self.lines:
                try:
                    port = json.loads(line).get("store_port")
                except ValueError:
                    continue
                if isinstance(port, int):
                    return port
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            self._got_line.wait(0.1)
            self._got_line.clear()
        raise worker.WorkerError("the torch rank printed no store port: %s" % self._last_error())

    def _last_error(self) -> str:
        if self.proc.poll() is None:
            return "still running"
        err = self.proc.stderr.read().decode("utf-8", "replace") if self.proc.stderr else ""
        last = [line for line in err.splitlines() if line.strip()]
        return "exited with status %s: %s" % (self.proc.returncode, last[-1].strip() if last else "no error output")

    def kill(self) -> None:
        worker.kill_group(self.proc)

    def wait(self, deadline: float, abort: Abort) -> dict[str, Any]:
        while self.proc.poll() is None:
            if abort.event.is_set():
                self.kill()
                return {"outcome": RANK_PEER_LOST, "reason": abort.reason}
            if time.monotonic() > deadline:
                self.kill()
                return {"outcome": RANK_BROKEN, "reason": "the run deadline passed during the torch sweep"}
            time.sleep(0.05)
        self._reader.join(5)
        if self.proc.returncode != 0:
            if abort.event.is_set():
                return {"outcome": RANK_PEER_LOST, "reason": abort.reason}
            return {"outcome": RANK_BROKEN, "reason": "the torch rank %s" % self._last_error()}
        try:
            answer = worker.parse_answer(0, "".join(self.lines), "", "the torch rank")
        except worker.WorkerError as exc:
            return {"outcome": RANK_BROKEN, "reason": str(exc)}
        return {"outcome": RANK_OK, "rows": answer.get("rows") or [], "torch_version": answer.get("torch_version"),
                "device": answer.get("device")}


# ---------------------------------------------------------------- rank 0

class _Watch:
    """Rank 0's view of every other rank's control channel during the run: ready, reports, connections that end."""

    def __init__(self, channels: Mapping[int, wire.Channel], abort: Abort) -> None:
        self.channels = dict(channels)
        self.abort = abort
        self.ready: set[int] = set()
        self.reports: dict[int, dict[str, Any]] = {}
        self.gone: dict[int, str] = {}
        self.changed = threading.Condition()
        self._selector = selectors.DefaultSelector()
        self._readers = {}
        for rank, channel in self.channels.items():
            channel.sock.setblocking(False)
            self._readers[rank] = wire.FrameReader(channel.peer)
            self._selector.register(channel.sock, selectors.EVENT_READ, rank)
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="hydra-fabric-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop and self._selector.get_map():
            for key, _mask in self._selector.select(0.1):
                rank = key.data
                try:
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                except BlockingIOError:
                    continue
                except OSError as exc:
                    self._lost(rank, "reset its connection to rank 0 (%s)" % (exc.strerror or exc))
                    continue
                if not data:
                    self._lost(rank, "closed its connection to rank 0 (the process ended)")
                    continue
                try:
                    messages = self._readers[rank].feed(data)
                except wire.ProtocolError as exc:
                    self._lost(rank, str(exc))
                    continue
                for message in messages:
                    self._take(rank, message)

    def _lost(self, rank: int, reason: str) -> None:
        try:
            self._selector.unregister(self.channels[rank].sock)
        except (KeyError, ValueError):
            pass
        with self.changed:
            if rank not in self.reports:
                self.gone[rank] = reason
            self.changed.notify_all()
        if rank not in self.reports:
            self.abort.set("rank %d %s" % (rank, reason))

    def _take(self, rank: int, message: Mapping[str, Any]) -> None:
        with self.changed:
            if message.get("t") == "ready":
                self.ready.add(rank)
            elif message.get("t") == "report":
                self.reports[rank] = dict(message)
            self.changed.notify_all()
        if message.get("t") == "report" and message.get("outcome") != RANK_OK:
            self.abort.set("rank %d: %s" % (rank, message.get("reason") or message.get("outcome")))

    def wait(self, done: Callable[[], bool], deadline: float) -> bool:
        with self.changed:
            while not done():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.changed.wait(min(remaining, 0.2))
        return True

    def stop(self) -> None:
        """Stop watching (before the channels are used or closed by anyone else); idempotent."""
        if self._stop:
            return
        self._stop = True
        self._thread.join(2)
        self._selector.close()
        for channel in self.channels.values():
            try:
                channel.sock.setblocking(True)
            except OSError:
                pass


def _write_port_file(path: str, text: str) -> None:
    _atomic.write_atomic(path, text + "\n", mode=0o600)


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def gather(listener: socket.socket, token: str, run_id: str, world: int, deadline: float) -> tuple[dict[int, tuple[wire.Channel, dict[str, Any]]], list[str]]:
    """Rank 0: accept joins until every rank is in or the join deadline; each connection answers the challenge in
    its own thread, so a stranger that stalls costs nothing. Returns ({rank: (channel, join message)}, rejections)."""
    joined: dict[int, tuple[wire.Channel, dict[str, Any]]] = {}
    rejected: list[str] = []
    lock = threading.Lock()
    everyone = threading.Event()

    def handshake(sock: socket.socket, where: str) -> None:
        channel = wire.Channel(sock, where)
        try:
            hello = wire.challenge(channel, token, run_id, "join", deadline)
            rank = hello["rank"]
            with lock:
                if not 1 <= rank < world or rank in joined:
                    raise wire.ProtocolError("%s claimed rank %r, which is not free" % (where, rank))
                joined[rank] = (channel, hello)
                if len(joined) == world - 1:
                    everyone.set()
        except (wire.ProtocolError, wire.PeerClosed, wire.PeerSilent) as exc:
            channel.close()
            with lock:
                rejected.append("%s: %s" % (where, exc))

    while not everyone.is_set() and time.monotonic() < deadline:
        listener.settimeout(max(min(0.2, deadline - time.monotonic()), 0.01))
        try:
            sock, address = listener.accept()
        except socket.timeout:
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=handshake, args=(sock, "%s:%d" % address[:2]), name="hydra-fabric-join", daemon=True).start()
    with lock:
        return dict(joined), list(rejected)


class Rank:
    """One rank's run: run() returns the module's ``fabric`` result."""

    def __init__(self, options: Mapping[str, Any], clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self.rank = options["rank"]
        self.world = options["world"]
        self.started = clock()
        self.join_deadline = self.started + options["join_timeout"]
        self.run_deadline = self.started + options["run_timeout"]
        self.abort = Abort()
        self.result: dict[str, Any] = {
            "run_id": options["run_id"], "round": options.get("round"), "group": options.get("group"), "rank": self.rank,
            "world": self.world, "host": options["host"], "address": options["address"], "outcome": None, "reason": None,
            "backend": None, "rows": [], "verdict": None,
        }

    def finish(self, outcome: str, reason: Optional[str] = None, **extra: Any) -> dict[str, Any]:
        self.result.update(outcome=outcome, reason=reason, **extra)
        self.result["duration_s"] = round(time.monotonic() - self.started, 3)
        return self.result

    def run(self) -> dict[str, Any]:
        options = self.options
        port_range = wire.parse_port_range(options.get("port_range"))
        try:
            ring_listener = wire.listen(options["address"], port_range)
            master_listener = wire.listen(options["address"], port_range) if self.rank == 0 else None
        except OSError as exc:
            if self.rank == 0:
                _write_port_file(options["port_file"], "error=%s" % exc)
            return self.finish(RANK_BROKEN, "%s (set fabric_address to this host's address on the fabric network)" % exc)
        try:
            if master_listener is not None:
                _write_port_file(options["port_file"], "port=%d" % master_listener.getsockname()[1])
                return self._run_master(master_listener, ring_listener)
            return self._run_member(ring_listener)
        finally:
            wire.close_quietly(ring_listener)
            wire.close_quietly(master_listener)
            if master_listener is not None:
                _remove_quietly(options["port_file"])  # read long before: the others joined through it

    # -- rank 0

    def _run_master(self, listener: socket.socket, ring_listener: socket.socket) -> dict[str, Any]:
        options = self.options
        caps = capabilities(options["backend"], options.get("torch_python"), self.join_deadline)
        joined, rejected = gather(listener, options["token"], options["run_id"], self.world, self.join_deadline)
        wire.close_quietly(listener)
        channels = {rank: channel for rank, (channel, _hello) in joined.items()}
        hellos = {rank: hello for rank, (_channel, hello) in joined.items()}
        verdict: dict[str, Any] = {"complete": False, "rejected": rejected[:10], "rejected_count": len(rejected),
                                   "missing": [], "lost": [], "rows": [], "backend": None}
        missing = [rank for rank in range(1, self.world) if rank not in joined]
        if missing:
            verdict["missing"] = [{"rank": rank, "reason": "did not join within the join deadline (join_timeout=%gs)"
                                   % options["join_timeout"]} for rank in missing]
            return self._conclude(channels, verdict, RANK_PEER_LOST, "%d rank%s did not join" % (len(missing), "" if len(missing) == 1 else "s"))
        peers = [{"rank": 0, "host": options["host"], "address": options["address"],
                  "ring_port": ring_listener.getsockname()[1]}]
        for rank in range(1, self.world):
            hello = hellos[rank]
            peers.append({"rank": rank, "host": str(hello.get("host")), "address": str(hello.get("address")),
                          "ring_port": int(hello.get("ring_port") or 0)})
        all_caps = {0: caps}
        all_caps.update({rank: hellos[rank].get("caps") or {} for rank in hellos})
        backend, why = agree(options["backend"], all_caps, {p["rank"]: p["host"] for p in peers})
        verdict.update(backend=backend, backend_reason=why, members=[p["host"] for p in peers])
        if backend is None:
            return self._conclude(channels, verdict, RANK_BROKEN, why)
        label = RCCL if backend == NCCL and caps.get("accelerator") == "rocm" else backend
        verdict["backend"] = label
        self.result["backend"] = label
        torch_rank = None
        start: dict[str, Any] = {"t": "start", "backend": backend, "label": label, "peers": peers, "seed": options["seed"]}
        if backend != TCP:
            try:
                torch_rank = TorchRank(options, backend, 0, self.world, options["address"], 0, self.run_deadline)
                start["store_port"] = torch_rank.store_port(self.join_deadline)
            except worker.WorkerError as exc:
                if torch_rank is not None:
                    torch_rank.kill()
                return self._conclude(channels, verdict, RANK_BROKEN, str(exc))
        for rank, channel in channels.items():
            try:
                channel.send(start)
            except (wire.PeerClosed, wire.PeerSilent) as exc:
                verdict["lost"].append({"rank": rank, "reason": "gone before the start: %s" % exc})
        if verdict["lost"]:
            if torch_rank is not None:
                torch_rank.kill()
            return self._conclude(channels, verdict, RANK_PEER_LOST, "a rank left before the start")
        watch = _Watch(channels, self.abort)
        try:
            own = self._master_run(watch, channels, backend, torch_rank, ring_listener, peers)
            return self._judge(watch, channels, verdict, own)
        finally:
            watch.stop()

    def _master_run(self, watch: _Watch, channels: Mapping[int, wire.Channel], backend: str, torch_rank: Optional[TorchRank],
                    ring_listener: socket.socket, peers: list[dict[str, Any]]) -> dict[str, Any]:
        options = self.options
        sockets: tuple[Optional[socket.socket], Optional[socket.socket]] = (None, None)
        try:
            if backend == TCP:
                sockets = connect_ring(0, self.world, peers, ring_listener, options["token"], options["run_id"], self.join_deadline)
            if not watch.wait(lambda: len(watch.ready) == self.world - 1 or bool(watch.gone), self.join_deadline):
                not_ready = sorted(set(channels) - watch.ready)
                self.abort.set("rank%s %s did not connect its ring within the join deadline"
                               % ("s" if len(not_ready) > 1 else "", ", ".join(str(r) for r in not_ready)))
            if self.abort.event.is_set():
                return {"outcome": RANK_PEER_LOST, "reason": self.abort.reason}
            for channel in channels.values():
                try:
                    channel.send({"t": "go"})
                except (wire.PeerClosed, wire.PeerSilent):
                    pass  # the watch sees it
            if backend == TCP:
                right, left = sockets
                if right is None or left is None:
                    return {"outcome": RANK_BROKEN, "reason": "no ring connections"}
                return run_tcp(options, 0, self.world, right, left, self.abort, self.run_deadline)
            if torch_rank is None:
                return {"outcome": RANK_BROKEN, "reason": "no torch rank"}
            return torch_rank.wait(self.run_deadline, self.abort)
        except (wire.PeerSilent, wire.PeerClosed, wire.ProtocolError) as exc:
            self.abort.set("rank 0 could not connect its ring: %s" % exc)
            return {"outcome": RANK_PEER_LOST, "reason": str(exc)}
        finally:
            if torch_rank is not None and torch_rank.proc.poll() is None:
                torch_rank.kill()
            for sock in sockets:
                wire.close_quietly(sock)

    def _judge(self, watch: _Watch, channels: Mapping[int, wire.Channel], verdict: dict[str, Any],
               own: Mapping[str, Any]) -> dict[str, Any]:
        """Wait for every report (a grace once one rank failed), name who was lost, and send the verdict."""
        if own.get("outcome") != RANK_OK:
            self.abort.set("rank 0: %s" % own.get("reason"))
        self._broadcast_abort_if_set(channels)
        everyone = set(channels)

        def all_in() -> bool:
            return everyone <= set(watch.reports) | set(watch.gone)

        deadline = self.run_deadline
        if not watch.wait(lambda: all_in() or self.abort.event.is_set(), deadline):
            pass
        if self.abort.event.is_set():
            self._broadcast_abort_if_set(channels)
            watch.wait(all_in, min(deadline, time.monotonic() + self.options["step_timeout"] + REPORT_GRACE_S))
        watch.stop()
        with watch.changed:
            reports = dict(watch.reports)
            gone = dict(watch.gone)
        silent = sorted(everyone - set(reports) - set(gone))
        lost = [{"rank": rank, "reason": reason} for rank, reason in sorted(gone.items())]
        lost += [{"rank": rank, "reason": "sent no report by the run deadline (its host went silent)"} for rank in silent]
        verdict["lost"].extend(lost)
        suspects = [{"rank": rank, "suspect_rank": rep["suspect_rank"], "reason": rep.get("reason")}
                    for rank, rep in sorted(reports.items()) if rep.get("suspect_rank") is not None]
        if own.get("suspect_rank") is not None:
            suspects.insert(0, {"rank": 0, "suspect_rank": own["suspect_rank"], "reason": own.get("reason")})
        verdict["reports"] = suspects
        failed = {rank: rep for rank, rep in reports.items() if rep.get("outcome") != RANK_OK}
        if own.get("outcome") == RANK_OK and not failed and not lost:
            rows = {0: own["rows"]}
            rows.update({rank: rep.get("rows") or [] for rank, rep in reports.items()})
            if all(len(r) == len(own["rows"]) for r in rows.values()):
                verdict["rows"] = group_rows(rows, self.world)
                verdict["complete"] = True
                verdict["reducers"] = sorted({str(rep.get("reducer")) for rep in reports.values()} | {str(own.get("reducer"))})
                self.result["rows"] = own["rows"]
                known = {key: own[key] for key in ("reducer", "torch_version", "device") if own.get(key) is not None}
                return self._conclude(channels, verdict, RANK_OK, None, **known)
            verdict["broken"] = [{"rank": 0, "reason": "ranks returned different numbers of sizes"}]
            return self._conclude(channels, verdict, RANK_BROKEN, "ranks returned different numbers of sizes")
        verdict["broken"] = [{"rank": rank, "reason": rep.get("reason")} for rank, rep in sorted(failed.items())
                             if rep.get("outcome") == RANK_BROKEN]
        if own.get("outcome") == RANK_BROKEN:
            verdict["broken"].insert(0, {"rank": 0, "reason": own.get("reason")})
        outcome = str(own.get("outcome")) if own.get("outcome") != RANK_OK else RANK_PEER_LOST
        return self._conclude(channels, verdict, outcome, own.get("reason") or (self.abort.reason or "the group did not finish"))

    def _broadcast_abort_if_set(self, channels: Mapping[int, wire.Channel]) -> None:
        if not self.abort.event.is_set() or getattr(self, "_abort_sent", False):
            return
        self._abort_sent = True
        for channel in channels.values():
            try:
                channel.send({"t": "abort", "reason": self.abort.reason}, timeout=2.0)
            except (wire.PeerClosed, wire.PeerSilent):
                pass

    def _conclude(self, channels: Mapping[int, wire.Channel], verdict: dict[str, Any], outcome: str, reason: Optional[str],
                  **extra: Any) -> dict[str, Any]:
        """Send the verdict to every rank still there, close, and finish with it."""
        message = {"t": "verdict", "verdict": verdict}
        for channel in channels.values():
            try:
                channel.send(message, timeout=5.0)
            except (wire.PeerClosed, wire.PeerSilent):
                pass
            channel.close()
        self.result["verdict"] = verdict
        return self.finish(outcome, reason, **extra)

    # -- the other ranks

    def _run_member(self, ring_listener: socket.socket) -> dict[str, Any]:
        options = self.options
        caps = capabilities(options["backend"], options.get("torch_python"), self.join_deadline)
        master = "rank 0 (%s)" % options["master_address"]
        try:
            sock = wire.connect(options["master_address"], options["master_port"], self.join_deadline)
            channel = wire.Channel(sock, master)
            wire.answer(channel, options["token"], options["run_id"], "join", self.rank, self.join_deadline, extra={
                "host": options["host"], "address": options["address"], "ring_port": ring_listener.getsockname()[1], "caps": caps})
        except (wire.PeerSilent, wire.PeerClosed, wire.ProtocolError) as exc:
            return self.finish(RANK_NOT_JOINED, "could not join %s: %s" % (master, exc))
        try:
            return self._member_run(channel, ring_listener)
        finally:
            channel.close()

    def _member_run(self, channel: wire.Channel, ring_listener: socket.socket) -> dict[str, Any]:
        options = self.options
        try:
            start = channel.recv(self.join_deadline)
        except (wire.PeerSilent, wire.PeerClosed, wire.ProtocolError) as exc:
            return self.finish(RANK_PEER_LOST, "rank 0 sent no start: %s" % exc)
        if start.get("t") == "verdict":
            self.result["verdict"] = start.get("verdict")
            return self.finish(RANK_PEER_LOST if (start.get("verdict") or {}).get("missing") else RANK_BROKEN,
                               "the group did not start: %s" % _verdict_reason(start.get("verdict")))
        if start.get("t") != "start":
            return self.finish(RANK_BROKEN, "rank 0 sent %r instead of the start" % start.get("t"))
        backend = start["backend"]
        self.result["backend"] = start.get("label") or backend
        peers = start["peers"]
        torch_rank = None
        sockets: tuple[Optional[socket.socket], Optional[socket.socket]] = (None, None)
        try:
            if backend == TCP:
                sockets = connect_ring(self.rank, self.world, peers, ring_listener, options["token"], options["run_id"],
                                       self.join_deadline)
            else:
                torch_rank = TorchRank(options, backend, self.rank, self.world, options["master_address"],
                                       int(start["store_port"]), self.run_deadline)
        except (wire.PeerSilent, wire.PeerClosed, wire.ProtocolError) as exc:
            return self._report(channel, {"outcome": RANK_PEER_LOST, "reason": "ring: %s" % exc})
        except worker.WorkerError as exc:
            return self._report(channel, {"outcome": RANK_BROKEN, "reason": str(exc)})
        try:
            channel.send({"t": "ready"})
            go = channel.recv(self.join_deadline)
            if go.get("t") != "go":
                verdict = go.get("verdict") if go.get("t") == "verdict" else None
                self.result["verdict"] = verdict
                return self.finish(RANK_PEER_LOST, "rank 0 stopped the group: %s" % (go.get("reason") or _verdict_reason(verdict)))
            listener = threading.Thread(target=self._listen_to_master, args=(channel,), name="hydra-fabric-master", daemon=True)
            listener.start()
            if backend == TCP:
                right, left = sockets
                own = run_tcp(options, self.rank, self.world, right, left, self.abort, self.run_deadline) if right and left else {
                    "outcome": RANK_BROKEN, "reason": "no ring connections"}
            elif torch_rank is not None:
                own = torch_rank.wait(self.run_deadline, self.abort)
            else:
                own = {"outcome": RANK_BROKEN, "reason": "no torch rank"}
            return self._report(channel, own, listener)
        except (wire.PeerSilent, wire.PeerClosed, wire.ProtocolError) as exc:
            return self.finish(RANK_PEER_LOST, "lost rank 0: %s" % exc)
        finally:
            if torch_rank is not None and torch_rank.proc.poll() is None:
                torch_rank.kill()
            for sock in sockets:
                wire.close_quietly(sock)

    def _listen_to_master(self, channel: wire.Channel) -> None:
        """During the run: an abort or the verdict from rank 0; its connection ending aborts this rank too."""
        while True:
            try:
                message = channel.recv(self.run_deadline)
            except (wire.PeerSilent, wire.PeerClosed, wire.ProtocolError) as exc:
                if self.result.get("verdict") is None:
                    self.abort.set("rank 0 (%s) is gone: %s" % (self.options["master_address"], exc))
                    self._master_gone = str(exc)
                return
            if message.get("t") == "abort":
                self.abort.set(str(message.get("reason") or "rank 0 aborted the run"))
            elif message.get("t") == "verdict":
                self.result["verdict"] = message.get("verdict")
                self.abort.set("rank 0 sent its verdict")  # nothing left to wait for
                return

    def _report(self, channel: wire.Channel, own: dict[str, Any], listener: Optional[threading.Thread] = None) -> dict[str, Any]:
        report = {"t": "report", "outcome": own["outcome"], "reason": own.get("reason"), "rows": own.get("rows") or [],
                  "reducer": own.get("reducer"), "suspect_rank": own.get("suspect_rank")}
        try:
            channel.send(report)
        except (wire.PeerSilent, wire.PeerClosed):
            pass  # rank 0 is gone: the verdict will not come
        if listener is not None:
            listener.join(max(self.run_deadline - time.monotonic(), 0.0))
        else:
            try:
                message = channel.recv(self.run_deadline)
                if message.get("t") == "verdict":
                    self.result["verdict"] = message.get("verdict")
            except (wire.PeerSilent, wire.PeerClosed, wire.ProtocolError):
                pass
        self.result["rows"] = own.get("rows") or []
        extra = {key: own[key] for key in ("reducer", "torch_version", "device", "suspect_rank") if own.get(key) is not None}
        verdict = self.result.get("verdict")
        if own["outcome"] == RANK_OK and (verdict is None or not verdict.get("complete")):
            if verdict is None:
                return self.finish(RANK_PEER_LOST, "rank 0 (%s) sent no verdict%s" % (
                    self.options["master_address"], ": %s" % self._master_gone if getattr(self, "_master_gone", None) else ""), **extra)
            return self.finish(RANK_PEER_LOST, "the group did not finish: %s" % _verdict_reason(verdict), **extra)
        return self.finish(own["outcome"], own.get("reason"), **extra)


def _verdict_reason(verdict: Optional[Mapping[str, Any]]) -> str:
    if not verdict:
        return "no verdict"
    for key, word in (("missing", "did not join"), ("lost", "lost")):
        if verdict.get(key):
            return "; ".join("rank %s %s" % (item["rank"], item.get("reason") or word) for item in verdict[key])
    if verdict.get("broken"):
        return "; ".join("rank %s: %s" % (item["rank"], item.get("reason")) for item in verdict["broken"])
    return verdict.get("backend_reason") or "incomplete"


def idle(slurm_node: Optional[str], force: bool) -> dict[str, Any]:
    """Whether this host may run a rank (the module's ``mode: idle``): _host/idle.py's guard on its node now; the
    planner leaves a host whose ``refused`` is set out of every round (fabric_plan's ``idle_var``)."""
    return _idle.guard(slurm_node, force)


def run(options: Mapping[str, Any]) -> dict[str, Any]:
    """Validate, then run this host's rank; the module's ``fabric`` result. FabricInputError for a bad option."""
    validate(options)
    return Rank(options).run()

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An all-reduce inside one host: torch.distributed over NCCL/RCCL across the local GPUs (two or more), gloo
between CPU processes otherwise; without torch, NumPy arrays exchanged between processes through pipes.

Rank 0 times the phases allreduce and check of every step. Prints the bus bandwidth (NCCL tests' busbw, the
algorithm bandwidth times 2(n-1)/n) as ``performance: <GB/s> busbw_GB_per_second``.
"""

import argparse
import importlib.util
import multiprocessing
import os
import socket
import sys
import time


def load_phases():
    """hydra_phases from the run's PYTHONPATH, else the collection checkout this script lives in."""
    try:
        import hydra_phases  # pylint: disable=import-outside-toplevel
        return hydra_phases
    except ImportError:
        here = os.path.dirname(os.path.abspath(__file__))
        path = os.path.join(here, "..", "..", "..", "plugins", "module_utils", "_workload", "phases.py")
        spec = importlib.util.spec_from_file_location("hydra_phases", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


phases = load_phases()


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto")
    parser.add_argument("--backend", choices=("auto", "torch", "numpy"), default="auto")
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--ranks", type=int, default=2, help="processes on CPU (GPU runs use every local GPU)")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--max-steps", type=int, default=100)
    return parser.parse_args(argv)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def report(world, nbytes, times):
    if not times:
        raise SystemExit("allreduce: no timed step")
    algbw = nbytes / (sum(times) / len(times)) / 1e9
    print("ranks: %d, steps: %d, algbw %.3f GB/s" % (world, len(times), algbw))
    print("performance: %.3f busbw_GB_per_second" % (algbw * 2 * (world - 1) / world))


def timed_step(reduce_once, check):
    """One step in its phases (the all-reduce, then the check of its result); seconds of the all-reduce."""
    with phases.step():
        with phases.phase("allreduce"):
            start = time.perf_counter()
            reduce_once()
            spent = time.perf_counter() - start
        with phases.phase("check"):
            check()
    return spent


def loop(args, reduce_once, check):
    """Run steps until the time or step budget ends; seconds of each timed step (after two warm-ups)."""
    times = []
    count = 0
    deadline = time.perf_counter() + args.seconds
    while count < args.max_steps and (count < 5 or time.perf_counter() < deadline):
        spent = timed_step(reduce_once, check)
        if count >= 2:
            times.append(spent)
        count += 1
    return times


# --- torch.distributed -------------------------------------------------------------------------------------


def torch_worker(rank, world, port, args, use_gpu):
    import torch  # pylint: disable=import-outside-toplevel
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if rank != 0:
        os.environ.pop(phases.ENV_VAR, None)  # one rank writes the phases
    dist.init_process_group("nccl" if use_gpu else "gloo", rank=rank, world_size=world)
    device = torch.device("cuda", rank) if use_gpu else torch.device("cpu")
    if use_gpu:
        torch.cuda.set_device(rank)
    tensor = torch.ones(args.mib * 1048576 // 4, dtype=torch.float32, device=device)
    budget = torch.zeros(1, device=device)

    def reduce_once():
        tensor.fill_(1.0)
        dist.all_reduce(tensor)
        if use_gpu:
            torch.cuda.synchronize()

    def check():
        if float(tensor[-1]) != float(world):
            raise SystemExit("allreduce: rank %d holds %s, expected %d" % (rank, float(tensor[-1]), world))

    # Every rank must run the same number of steps: rank 0 decides and broadcasts.
    times = []
    count = 0
    deadline = time.perf_counter() + args.seconds
    while True:
        budget.fill_(1.0 if rank == 0 and count < args.max_steps and (count < 5 or time.perf_counter() < deadline) else 0.0)
        dist.broadcast(budget, 0)
        if float(budget[0]) == 0.0:
            break
        spent = timed_step(reduce_once, check)
        if count >= 2:
            times.append(spent)
        count += 1
    if rank == 0:
        print("backend: torch %s %s" % (torch.__version__, "nccl" if use_gpu else "gloo"))
        report(world, args.mib * 1048576, times)
    dist.destroy_process_group()


def run_torch(torch, args):
    gpus = torch.cuda.device_count() if args.device != "cpu" else 0
    if args.device == "gpu" and gpus < 2:
        raise SystemExit("allreduce: --device gpu needs two or more GPUs visible to torch; it sees %d" % gpus)
    use_gpu = gpus >= 2
    world = gpus if use_gpu else args.ranks
    torch.multiprocessing.spawn(torch_worker, args=(world, free_port(), args, use_gpu), nprocs=world, join=True)


# --- NumPy over pipes ------------------------------------------------------------------------------------------


def numpy_peer(rank, world, conns, args):
    """A rank other than 0: on each "go", send its data to rank 0 and check the sum it gets back."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    data = np.ones(args.mib * 1048576 // 4, dtype=np.float32)
    conn = conns[rank]
    while conn.recv() == "go":
        conn.send_bytes(data)  # my contribution
        result = np.frombuffer(conn.recv_bytes(), dtype=np.float32)
        if result[-1] != world:
            raise SystemExit("allreduce: rank %d holds %s, expected %d" % (rank, result[-1], world))


def run_numpy(args):
    import numpy as np  # pylint: disable=import-outside-toplevel
    if args.device == "gpu":
        raise SystemExit("allreduce: --device gpu needs torch with NCCL/RCCL; only NumPy is installed")
    world = max(2, args.ranks)
    pipes = [multiprocessing.Pipe() for _rank in range(world)]
    peers = [multiprocessing.Process(target=numpy_peer, args=(rank, world, [p[1] for p in pipes], args)) for rank in range(1, world)]
    for peer in peers:
        peer.start()
    data = np.ones(args.mib * 1048576 // 4, dtype=np.float32)
    total = np.empty_like(data)

    def reduce_once():
        # Reduce at rank 0, then broadcast: every rank ends with the sum (a star all-reduce).
        np.copyto(total, data)
        for rank in range(1, world):
            pipes[rank][0].send("go")
        for rank in range(1, world):
            np.add(total, np.frombuffer(pipes[rank][0].recv_bytes(), dtype=np.float32), out=total)
        for rank in range(1, world):
            pipes[rank][0].send_bytes(total)

    def check():
        if total[-1] != world:
            raise SystemExit("allreduce: rank 0 holds %s, expected %d" % (total[-1], world))

    try:
        times = loop(args, reduce_once, check)
    finally:
        for rank in range(1, world):
            pipes[rank][0].send("stop")
        for peer in peers:
            peer.join(timeout=30)
    if any(peer.exitcode for peer in peers):
        raise SystemExit("allreduce: a peer process failed (exit codes %s)" % [peer.exitcode for peer in peers])
    print("backend: numpy %s, %d processes over pipes" % (np.__version__, world))
    report(world, args.mib * 1048576, times)


def main(argv):
    args = parse_args(argv)
    torch = None
    if args.backend != "numpy":
        try:
            import torch  # pylint: disable=import-outside-toplevel
        except ImportError:
            if args.backend == "torch":
                raise SystemExit("allreduce: --backend torch but torch is not installed") from None
    if torch is not None:
        run_torch(torch, args)
    else:
        run_numpy(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The torch backends' rank, run as ``python -c SOURCE ARGS_JSON`` (standard library only at import).

Mode "probe": what this interpreter's torch offers (version, gloo, NCCL/RCCL, GPUs); {"status": "absent"}
without torch. Mode "run": one rank of an all-reduce sweep through torch.distributed - gloo on CPU tensors,
NCCL (RCCL on ROCm builds) on GPU 0 - joined through a TCPStore: rank 0 opens it (on ``port``, 0 for any free
port) and prints {"store_port": N} first, which the host's rank hands to the other ranks over the
authenticated control channel; the others connect to it. Every size: a verified all-reduce (each rank's tensor
is rank + 1, the sum N(N+1)/2 is exact in float32), a fence, then ``iterations`` timed all-reduces. Prints one
JSON line: {"status": "ok", "rows": [{bytes, seconds, iterations, verified}], ...}.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

# Standard library only, and nothing from the collection: worker.py runs this file's source as ``python -c``.
import datetime
import json
import sys
import time
from typing import Any


def probe() -> dict[str, Any]:
    try:
        import torch  # pylint: disable=import-outside-toplevel
        import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        return {"status": "absent", "reason": "torch is not importable: %s" % exc}
    gpus = int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    hip = getattr(torch.version, "hip", None)
    return {"status": "ok", "torch_version": torch.__version__, "gloo": bool(dist.is_available() and dist.is_gloo_available()),
            "nccl": bool(dist.is_available() and dist.is_nccl_available()) and gpus > 0, "gpus": gpus,
            "accelerator": ("rocm" if hip else "cuda") if gpus else None,
            "device": torch.cuda.get_device_name(0) if gpus else None}


def run(args: dict[str, Any]) -> dict[str, Any]:
    import torch  # pylint: disable=import-outside-toplevel
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel

    backend = args["backend"]
    rank, world = args["rank"], args["world"]
    timeout = datetime.timedelta(seconds=max(args["timeout_s"], 1.0))
    store = dist.TCPStore(args["address"], args["port"], world, rank == 0, timeout=timeout, wait_for_workers=False)
    if rank == 0:
        sys.stdout.write(json.dumps({"store_port": store.port}) + "\n")
        sys.stdout.flush()
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", 0)
        torch.cuda.set_device(device)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    fence = torch.zeros(world, dtype=torch.float32, device=device)
    total = float(world * (world + 1) // 2)
    rows = []
    for nbytes in args["sizes"]:
        count = max(nbytes // 4, 1)
        check = torch.full((count,), float(rank + 1), dtype=torch.float32, device=device)
        dist.all_reduce(check)
        verified = bool(torch.all(check == total).item())
        del check
        work = torch.zeros(count, dtype=torch.float32, device=device)  # zeros: the sums never grow
        for _warm in range(args["warmup"]):
            dist.all_reduce(work)
        dist.all_reduce(fence)
        sync()
        iterations = args["latency_iterations"] if nbytes <= 16384 * world else args["iterations"]
        began = time.perf_counter()
        for _timed in range(iterations):
            dist.all_reduce(work)
        sync()
        rows.append({"bytes": count * 4, "seconds": (time.perf_counter() - began) / iterations, "iterations": iterations,
                     "verified": verified})
        del work
    dist.destroy_process_group()
    answer = {"status": "ok", "backend": backend, "rows": rows, "torch_version": torch.__version__}
    if device.type == "cuda":
        answer["device"] = torch.cuda.get_device_name(device)
    return answer


def main() -> None:
    args = json.loads(sys.argv[1])
    if args.get("mode") == "probe":
        answer = probe()
    else:
        answer = run(args)
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""PyTorch GPU worker, run as ``python -c SOURCE ARGS_JSON`` (standard library only at import).

Mode "inventory": torch and CUDA versions and the visible devices.
Mode "bench" (one GPU per process, so a hung or crashed GPU costs only its
own timeout): sustained matmul TFLOP/s at bf16, fp16 and fp32 (TF32 off, so
fp32 is fp32), pinned host->device and device->host copy GB/s, and device
memory bandwidth from a device-to-device copy (read + write bytes counted).
Prints one JSON line; a missing torch is {"status": "absent"}, not an error.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

# Standard library only, and nothing from the collection: worker.py runs this file's source as ``python -c``.
# So the answer's reading outcomes are spelled here ("ok" / "absent": _status.READ_OK / READ_ABSENT).
# torch and its tensors are typed Any (torch is imported in main(), when the child has it).
import json
import sys
import time
from typing import Any, Callable, Optional

MIB = 1024 * 1024


def inventory(torch: Any) -> dict[str, Any]:
    available = bool(torch.cuda.is_available())
    devices: list[dict[str, Any]] = []
    for index in range(torch.cuda.device_count() if available else 0):
        props = torch.cuda.get_device_properties(index)
        devices.append({"index": index, "name": props.name, "total_memory_bytes": int(props.total_memory),
                        "capability": "%d.%d" % (props.major, props.minor)})
    return {"status": "ok", "torch_version": torch.__version__, "cuda_available": available,
            "cuda_version": getattr(torch.version, "cuda", None), "devices": devices}


def _sync_timed(torch: Any, step: Callable[[], Any], warmup_s: float, duration_s: float, batch: int = 10) -> tuple[int, float]:
    """Warm up, then run ``step`` in synchronised batches until duration_s; returns (calls, seconds)."""
    step()
    torch.cuda.synchronize()
    warm_end = time.perf_counter() + warmup_s
    while time.perf_counter() < warm_end:
        for _call in range(batch):
            step()
        torch.cuda.synchronize()
    calls = 0
    start = time.perf_counter()
    while True:
        for _call in range(batch):
            step()
        torch.cuda.synchronize()
        calls += batch
        elapsed = time.perf_counter() - start
        if elapsed >= duration_s:
            return calls, elapsed


def matmul_tflops(torch: Any, device: Any, dtype: Any, n: int, warmup_s: float, duration_s: float) -> float:
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    calls, seconds = _sync_timed(torch, lambda: torch.matmul(a, b, out=out), warmup_s, duration_s)
    return 2.0 * n ** 3 * calls / seconds / 1e12


def transfer_gbps(torch: Any, device: Any, nbytes: int, repeats: int) -> tuple[Optional[float], Optional[float]]:
    """Pinned host -> device and device -> host copy rates; the buffers are freed on return."""
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    gpu = torch.empty(nbytes, dtype=torch.uint8, device=device)
    h2d = _best_copy_gbps(torch, lambda: gpu.copy_(host, non_blocking=True), nbytes, repeats)
    d2h = _best_copy_gbps(torch, lambda: host.copy_(gpu, non_blocking=True), nbytes, repeats)
    return h2d, d2h


def _best_copy_gbps(torch: Any, copy: Callable[[], Any], nbytes: int, repeats: int) -> Optional[float]:
    """Best of the timed copies, with CUDA events (they time the GPU, not the Python call)."""
    copy()
    torch.cuda.synchronize()
    best: Optional[float] = None
    for _repeat in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        copy()
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3
        rate = nbytes / seconds / 1e9
        best = rate if best is None else max(best, rate)
    return best


def bench(torch: Any, args: dict[str, Any]) -> dict[str, Any]:
    index = args["device"]
    device = torch.device("cuda", index)
    torch.cuda.set_device(device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    props = torch.cuda.get_device_properties(index)
    notes: list[str] = []
    out: dict[str, Any] = {"status": "ok", "index": index, "name": props.name, "torch_version": torch.__version__,
                           "matrix_n": args["matrix_n"], "transfer_bytes": args["transfer_mib"] * MIB}
    dtypes = (("bf16_tflops", torch.bfloat16), ("fp16_tflops", torch.float16), ("fp32_tflops", torch.float32))
    for key, dtype in dtypes:
        if dtype is torch.bfloat16 and not torch.cuda.is_bf16_supported():
            out[key] = None
            notes.append("bf16 is not supported on %s (compute capability %d.%d)" % (props.name, props.major, props.minor))
            continue
        out[key] = matmul_tflops(torch, device, dtype, args["matrix_n"], args["warmup_s"], args["duration_s"])
    out["h2d_gbps"], out["d2h_gbps"] = transfer_gbps(torch, device, args["transfer_mib"] * MIB, args["repeats"])
    device_bytes = args["device_copy_mib"] * MIB
    source = torch.empty(device_bytes, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    # A device copy reads and writes every byte: 2x the size moves through device memory.
    out["memory_bandwidth_gbps"] = _best_copy_gbps(torch, lambda: target.copy_(source), 2 * device_bytes, args["repeats"])
    out["notes"] = notes
    return out


def _answer(result: dict[str, Any]) -> None:
    """The one JSON line the parent reads (stdout is the protocol, not a log)."""
    sys.stdout.write(json.dumps(result) + "\n")


def main() -> None:
    args = json.loads(sys.argv[1])
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        _answer({"status": "absent", "reason": "torch is not importable by %s: %s" % (sys.executable, exc)})
        return
    _answer(inventory(torch) if args["mode"] == "inventory" else bench(torch, args))


if __name__ == "__main__":
    main()

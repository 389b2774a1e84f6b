# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""PyTorch GPU worker, run as ``python -c SOURCE ARGS_JSON`` (standard library only at import).

Mode "inventory": torch and CUDA versions and the visible devices.
Mode "bench" (profile; one GPU per process, so a hung or crashed GPU costs only its
own timeout): sustained matmul TFLOP/s at bf16, fp16 and fp32 (TF32 off, so
fp32 is fp32), pinned host->device and device->host copy GB/s, and device
memory bandwidth from a device-to-device copy (read + write bytes counted).
Mode "active" (doctor's deep checks; every GPU in one process, bounded by
``deadline_s``: a step that would start past it is listed in ``not_run``):
per GPU a seeded fp32 and bf16 matmul's checksum (bitwise comparison across
GPUs) and its largest error against the same product computed on the CPU in
fp32, matmul TFLOP/s, device-to-device copy GB/s, pinned H2D/D2H GB/s with
the PCIe link generation and width re-read from sysfs while the copies run;
then one all-reduce across the host's GPUs (torch.cuda.nccl: NCCL, or RCCL
on ROCm) as bus bandwidth (nccl-tests' busbw = algbw x 2(n-1)/n).
Prints one JSON line; a missing torch is {"status": "absent"}, not an error.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

# Standard library only, and nothing from the collection: worker.py runs this file's source as ``python -c``.
# So the answer's reading outcomes are spelled here ("ok" / "absent": _status.READ_OK / READ_ABSENT).
# torch and its tensors are typed Any (torch is imported in main(), when the child has it).
import json
import os
import sys
import threading
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


# ---------------------------------------------------------------- mode "active" (doctor deep)

# PCIe transfer rate (GT/s) -> generation: _host/pci.py PCIE_GEN_BY_GTS, copied because this file imports nothing
# from the collection (tests/unit/plugins/module_utils/_host/test_pci.py holds the two equal).
_GEN_BY_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6, 128.0: 7}


def link_gen(speed_text: Optional[str]) -> Optional[int]:
    """ "16.0 GT/s PCIe" (sysfs current_link_speed) -> 4; None when unreadable ("Unknown") or unknown."""
    try:
        return _GEN_BY_GTS.get(round(float((speed_text or "").split()[0]), 1))
    except (IndexError, ValueError):
        return None


def _read_sysfs(path: str) -> Optional[str]:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def read_link(bdf: Optional[str], root: str = "/") -> dict[str, Any]:
    """The GPU's PCIe link as sysfs states it now: current and max generation and width (None: unreadable)."""
    if not bdf:
        return {"gen": None, "width": None, "gen_max": None, "width_max": None}
    base = os.path.join(root, "sys/bus/pci/devices", bdf.lower())

    def width(name: str) -> Optional[int]:
        text = _read_sysfs(os.path.join(base, name))
        return int(text) if text and text.isdigit() else None
    return {"gen": link_gen(_read_sysfs(os.path.join(base, "current_link_speed"))), "width": width("current_link_width"),
            "gen_max": link_gen(_read_sysfs(os.path.join(base, "max_link_speed"))), "width_max": width("max_link_width")}


def bus_id(props: Any) -> Optional[str]:
    bus = getattr(props, "pci_bus_id", None)
    if bus is None:
        return None
    return "%04x:%02x:%02x.0" % (getattr(props, "pci_domain_id", 0), bus, getattr(props, "pci_device_id", 0))


def checksum(torch: Any, tensor: Any) -> str:
    """A position-weighted sum of the result's raw bits: equal for bitwise-equal results, different otherwise."""
    view_dtype = torch.int16 if tensor.element_size() == 2 else torch.int32
    bits = tensor.contiguous().view(-1).view(view_dtype).to(torch.int64)
    weights = torch.arange(1, bits.numel() + 1, dtype=torch.int64, device=bits.device)
    return "%x" % (int((bits * weights).sum().item()) & 0xFFFFFFFFFFFFFFFF)


def consistency(torch: Any, device: Any, inputs: tuple[Any, Any], reference: Any) -> dict[str, Any]:
    """The seeded product on this GPU, fp32 and bf16: checksums, and largest error relative to the CPU's fp32."""
    out: dict[str, Any] = {}
    scale = float(reference.abs().max().item()) or 1.0
    for label, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        if dtype is torch.bfloat16 and not torch.cuda.is_bf16_supported():
            out[label] = None
            continue
        a, b = (t.to(device=device, dtype=dtype) for t in inputs)
        product = torch.matmul(a, b)
        torch.cuda.synchronize(device)
        out[label] = {"checksum": checksum(torch, product),
                      "max_rel_error": float((product.float().cpu() - reference).abs().max().item()) / scale}
    return out


def pcie_under_load(torch: Any, device: Any, bdf: Optional[str], nbytes: int, duration_s: float) -> dict[str, Any]:
    """Pinned H2D and D2H copies, repeated for about duration_s each, while a thread re-reads the link."""
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    gpu = torch.empty(nbytes, dtype=torch.uint8, device=device)
    samples: list[dict[str, Any]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(read_link(bdf))
            stop.wait(0.05)
    sampler = threading.Thread(target=sample, name="hydra-link-sampler")
    sampler.daemon = True
    sampler.start()
    rates: dict[str, Any] = {}
    try:
        for key, copy in (("h2d_gbps", lambda: gpu.copy_(host, non_blocking=True)),
                          ("d2h_gbps", lambda: host.copy_(gpu, non_blocking=True))):
            best: Optional[float] = None
            end = time.perf_counter() + duration_s
            while best is None or time.perf_counter() < end:
                rate = _best_copy_gbps(torch, copy, nbytes, 3)
                best = rate if best is None or (rate or 0) > best else best
            rates[key] = best
    finally:
        stop.set()
        sampler.join(timeout=2)
    under_load = [s for s in samples if s["gen"] is not None or s["width"] is not None]
    rates["link_under_load"] = {
        "samples": len(under_load),
        "gen_min": min((s["gen"] for s in under_load if s["gen"] is not None), default=None),
        "width_min": min((s["width"] for s in under_load if s["width"] is not None), default=None),
        "gen_max": next((s["gen_max"] for s in under_load if s["gen_max"] is not None), None),
        "width_max": next((s["width_max"] for s in under_load if s["width_max"] is not None), None),
    }
    return rates


def allreduce_busbw(torch: Any, count: int, nbytes: int, repeats: int) -> dict[str, Any]:
    """One float32 all-reduce across GPUs 0..count-1 from this process (torch.cuda.nccl), best of the repeats."""
    tensors = [torch.ones(nbytes // 4, dtype=torch.float32, device=torch.device("cuda", index)) for index in range(count)]

    def sync() -> None:
        for index in range(count):
            torch.cuda.synchronize(index)
    torch.cuda.nccl.all_reduce(tensors)
    sync()
    best = None
    for _repeat in range(repeats):
        start = time.perf_counter()
        torch.cuda.nccl.all_reduce(tensors)
        sync()
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
    algbw = nbytes / (best or 1e-9) / 1e9
    return {"gpus": count, "bytes": nbytes, "algbw_gbps": algbw, "busbw_gbps": algbw * 2.0 * (count - 1) / count,
            "backend": "rccl" if getattr(torch.version, "hip", None) else "nccl", "nccl_version": _nccl_version(torch)}


def _nccl_version(torch: Any) -> Optional[str]:
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # pylint: disable=broad-exception-caught
        return None
    return ".".join(str(part) for part in version) if isinstance(version, tuple) else str(version)


def _error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, text[0] if text else "")


def active(torch: Any, args: dict[str, Any]) -> dict[str, Any]:
    """Every GPU's active measurements, then the all-reduce; steps past the deadline are listed, not run."""
    end = time.monotonic() + args["deadline_s"]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    out: dict[str, Any] = {"status": "ok", "torch_version": torch.__version__, "cuda_version": getattr(torch.version, "cuda", None),
                           "hip_version": getattr(torch.version, "hip", None), "gpus": [], "not_run": [], "steps": [],
                           "matrix_n": args["matrix_n"], "check_n": args["check_n"], "seed": args["seed"]}
    if not count:
        out["cuda_available"] = False
        return out
    out["cuda_available"] = True
    generator = torch.Generator().manual_seed(args["seed"])
    inputs = (torch.randn(args["check_n"], args["check_n"], generator=generator),
              torch.randn(args["check_n"], args["check_n"], generator=generator))
    reference = torch.matmul(*inputs)

    def step(label: str, call: Callable[[], Any]) -> Any:
        if time.monotonic() >= end:
            out["not_run"].append(label)
            return None
        start = time.monotonic()
        try:
            return call()
        except Exception as exc:  # pylint: disable=broad-exception-caught
            return {"error": _error(exc)}
        finally:
            out["steps"].append({"step": label, "seconds": round(time.monotonic() - start, 3)})

    for index in range(count):
        out["gpus"].append(_active_gpu(torch, args, index, inputs, reference, step))
    if count >= 2:
        out["allreduce"] = step("all-reduce over %d GPUs" % count, lambda: allreduce_busbw(
            torch, count, args["allreduce_mib"] * MIB, args["repeats"]))
    else:
        out["allreduce"] = None
    return out


def _matmul_call(torch: Any, device: Any, dtype: Any, args: dict[str, Any]) -> Callable[[], float]:
    return lambda: matmul_tflops(torch, device, dtype, args["matrix_n"], args["warmup_s"], args["duration_s"])


def _active_gpu(torch: Any, args: dict[str, Any], index: int, inputs: tuple[Any, Any], reference: Any,
                step: Callable[[str, Callable[[], Any]], Any]) -> dict[str, Any]:
    """One GPU's active measurements, each a step (skipped past the deadline, its error recorded)."""
    props = torch.cuda.get_device_properties(index)
    device = torch.device("cuda", index)
    bdf = bus_id(props)
    uuid = getattr(props, "uuid", None)
    gpu: dict[str, Any] = {"index": index, "name": props.name, "uuid": None if uuid is None else str(uuid),
                           "pci_bus_id": bdf, "capability": "%d.%d" % (props.major, props.minor),
                           "link_idle": read_link(bdf)}
    try:
        torch.cuda.set_device(device)
    except Exception as exc:  # pylint: disable=broad-exception-caught
        gpu["error"] = _error(exc)
        return gpu
    gpu["consistency"] = step("gpu %d consistency" % index, lambda: consistency(torch, device, inputs, reference))
    for key, dtype in (("bf16_tflops", torch.bfloat16), ("fp32_tflops", torch.float32)):
        if dtype is torch.bfloat16 and not torch.cuda.is_bf16_supported():
            gpu[key] = None
            continue
        gpu[key] = step("gpu %d %s" % (index, key), _matmul_call(torch, device, dtype, args))
    device_bytes = args["device_copy_mib"] * MIB

    def device_copy() -> Optional[float]:
        source = torch.empty(device_bytes, dtype=torch.uint8, device=device)
        target = torch.empty_like(source)
        return _best_copy_gbps(torch, lambda: target.copy_(source), 2 * device_bytes, args["repeats"])
    gpu["memory_bandwidth_gbps"] = step("gpu %d device copy" % index, device_copy)
    gpu["pcie"] = step("gpu %d pcie under load" % index, lambda: pcie_under_load(
        torch, device, bdf, args["transfer_mib"] * MIB, args["duration_s"]))
    torch.cuda.empty_cache()
    return gpu


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
    modes = {"inventory": lambda: inventory(torch), "bench": lambda: bench(torch, args), "active": lambda: active(torch, args)}
    _answer(modes[args["mode"]]())


if __name__ == "__main__":
    main()

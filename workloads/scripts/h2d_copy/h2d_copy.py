# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host-to-device copy loop: pinned host memory to the GPU with torch, else a host memory copy with NumPy.

Phases per iteration: copy (the transfer, synchronised) and check (one element read back). Prints
``performance: <GB/s> GB_per_second``.
"""

import argparse
import importlib.util
import os
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
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--max-steps", type=int, default=200)
    return parser.parse_args(argv)


def copier(args):
    """(label, copy(), check()) for the best path this host has."""
    nbytes = args.mib * 1048576
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available() and args.device != "cpu":
        src = torch.ones(nbytes // 4, dtype=torch.float32).pin_memory()
        dst = torch.empty_like(src, device="cuda")

        def copy_gpu():
            dst.copy_(src, non_blocking=True)
            torch.cuda.synchronize()
        return "torch %s pinned host -> %s" % (torch.__version__, torch.cuda.get_device_name(0)), copy_gpu, lambda: float(dst[-1])
    if args.device == "gpu":
        raise SystemExit("h2d_copy: --device gpu needs torch with GPU support (torch %s)"
                         % (torch.__version__ if torch is not None else "not installed"))
    import numpy as np  # pylint: disable=import-outside-toplevel
    src_np = np.ones(nbytes // 4, dtype=np.float32)
    dst_np = np.empty_like(src_np)

    def copy_host():
        np.copyto(dst_np, src_np)
    return "numpy %s host memory copy (no GPU)" % np.__version__, copy_host, lambda: float(dst_np[-1])


def main(argv):
    args = parse_args(argv)
    label, copy, check = copier(args)
    print("backend: %s, %d MiB per copy" % (label, args.mib))
    copy()  # warm-up: first touch, allocation
    moved = 0
    spent = 0.0
    count = 0
    deadline = time.perf_counter() + args.seconds
    while count < args.max_steps and (count < 3 or time.perf_counter() < deadline):
        with phases.step():
            with phases.phase("copy"):
                start = time.perf_counter()
                copy()
                spent += time.perf_counter() - start
            with phases.phase("check"):
                if check() != 1.0:
                    raise SystemExit("h2d_copy: the copied data is wrong")
        moved += args.mib * 1048576
        count += 1
    print("copies: %d" % count)
    print("performance: %.3f GB_per_second" % (moved / spent / 1e9))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small training loop on synthetic data: torch (CPU or GPU) when installed, else a NumPy MLP.

Times the phases data, forward, backward and optimizer of every step through the hydra_phases helper and prints
madengine's contract line ``performance: <samples/s> samples_per_second``.
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
    parser.add_argument("--backend", choices=("auto", "torch", "numpy"), default="auto")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--max-steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=3)
    return parser.parse_args(argv)


def torch_or_none(backend):
    if backend == "numpy":
        return None
    try:
        import torch  # pylint: disable=import-outside-toplevel
        return torch
    except ImportError:
        if backend == "torch":
            raise SystemExit("train_step: --backend torch but torch is not installed") from None
        return None


def run_torch(torch, args):
    gpu = torch.cuda.is_available()
    if args.device == "gpu" and not gpu:
        raise SystemExit("train_step: --device gpu but torch sees no GPU (torch %s)" % torch.__version__)
    device = torch.device("cuda" if gpu and args.device != "cpu" else "cpu")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    model = torch.nn.Sequential(torch.nn.Linear(args.width, args.width), torch.nn.ReLU(),
                                torch.nn.Linear(args.width, args.width), torch.nn.ReLU(),
                                torch.nn.Linear(args.width, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    print("backend: torch %s on %s" % (torch.__version__, torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"))

    def step():
        with phases.phase("data"):
            x = torch.randn(args.batch, args.width).to(device)
            y = torch.randn(args.batch, 1).to(device)
            sync()
        with phases.phase("forward"):
            loss = torch.nn.functional.mse_loss(model(x), y)
            sync()
        with phases.phase("backward"):
            optimizer.zero_grad()
            loss.backward()
            sync()
        with phases.phase("optimizer"):
            optimizer.step()
            sync()
        return float(loss.detach())
    return step


def run_numpy(args):
    import numpy as np  # pylint: disable=import-outside-toplevel
    if args.device == "gpu":
        raise SystemExit("train_step: --device gpu needs torch with GPU support; only NumPy is installed")
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((args.width, args.width)) / np.sqrt(args.width)).astype(np.float32)
    w2 = (rng.standard_normal((args.width, 1)) / np.sqrt(args.width)).astype(np.float32)
    lr = np.float32(1e-3)
    print("backend: numpy %s on cpu" % np.__version__)

    def step():
        nonlocal w1, w2
        with phases.phase("data"):
            x = rng.standard_normal((args.batch, args.width), dtype=np.float32)
            y = rng.standard_normal((args.batch, 1), dtype=np.float32)
        with phases.phase("forward"):
            hidden = np.maximum(x @ w1, 0)
            out = hidden @ w2
            diff = out - y
            loss = float(np.mean(diff * diff))
        with phases.phase("backward"):
            grad_out = 2 * diff / args.batch
            grad_w2 = hidden.T @ grad_out
            grad_hidden = (grad_out @ w2.T) * (hidden > 0)
            grad_w1 = x.T @ grad_hidden
        with phases.phase("optimizer"):
            w1 -= lr * grad_w1
            w2 -= lr * grad_w2
        return loss
    return step


def main(argv):
    args = parse_args(argv)
    torch = torch_or_none(args.backend)
    step = run_torch(torch, args) if torch is not None else run_numpy(args)
    samples = 0
    timed_s = 0.0
    deadline = time.perf_counter() + args.seconds
    count = 0
    loss = None
    while count < args.max_steps and (count < args.warmup + 2 or time.perf_counter() < deadline):
        start = time.perf_counter()
        with phases.step():
            loss = step()
        if count >= args.warmup:
            samples += args.batch
            timed_s += time.perf_counter() - start
        count += 1
    print("steps: %d, last loss %.4f" % (count, loss))
    print("performance: %.1f samples_per_second" % (samples / timed_s))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

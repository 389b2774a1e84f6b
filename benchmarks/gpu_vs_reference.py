# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""profile's GPU figures against the best measured references of the SKU table (needs a GPU and torch).

Runs profile's GPU benchmark (one torch subprocess per GPU) and, per GPU, divides bf16 matmul TFLOP/s
by the SKU's best measured figure (goal >= 0.9) and the pinned host->device GB/s by the PCIe link
rate the GPU trained for (goal >= 0.8). The link comes from nvidia-smi (max gen and width), else the
SKU's host link.

    python benchmarks/gpu_vs_reference.py [--python /path/to/venv/bin/python] [--seconds 10]
"""

import argparse
import json
import subprocess
import sys

from ansible_collections.continuum.hydra.plugins.module_utils._profile import verdict
from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import gpu


def link_of(index):
    """(max gen, max width) of a GPU from nvidia-smi, (None, None) when unreadable."""
    try:
        out = subprocess.run(["nvidia-smi", "-i", str(index), "--query-gpu=pcie.link.gen.max,pcie.link.width.max",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30, check=True).stdout
        gen, width = (int(v) for v in out.strip().split(","))
        return gen, width
    except (OSError, subprocess.SubprocessError, ValueError):
        return None, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=None, help="interpreter with torch (default: this one)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    args = parser.parse_args()
    result = gpu.run_gpu(args.warmup, args.seconds, python=args.python)
    if result["status"] == "skipped":
        sys.exit("no GPU benchmark: %s" % result["message"])
    rows = []
    for entry in result["gpus"]:
        sku = verdict.find_sku(entry["name"])
        gen, width = link_of(entry["index"])
        gen, width = gen or (sku or {}).get("pcie_gen"), width or (sku or {}).get("pcie_width")
        rate = verdict.link_rate_gbps(gen, width)
        reference = (sku or {}).get("bf16_tflops_measured")
        row = dict((key, entry.get(key)) for key in ("index", "name", "status", "bf16_tflops", "fp16_tflops", "fp32_tflops",
                                                     "h2d_gbps", "d2h_gbps", "memory_bandwidth_gbps"))
        row.update({"sku": (sku or {}).get("id"), "bf16_reference_tflops": reference, "link": "Gen%s x%s" % (gen, width),
                    "link_rate_gbps": round(rate, 2) if rate else None,
                    "bf16_ratio": round(entry["bf16_tflops"] / reference, 3) if reference and entry.get("bf16_tflops") else None,
                    "h2d_ratio": round(entry["h2d_gbps"] / rate, 3) if rate and entry.get("h2d_gbps") else None})
        rows.append(row)
    met = all((row["bf16_ratio"] or 0) >= 0.9 and (row["h2d_ratio"] or 0) >= 0.8 for row in rows)
    print(json.dumps({"torch_version": result.get("torch_version"), "gpus": rows,
                      "goal": "bf16_ratio >= 0.9 and h2d_ratio >= 0.8 on every GPU", "met": met}, indent=2))


if __name__ == "__main__":
    main()

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The GPU SKU reference table and PCIe link rates: data only, each figure with its source.

profile's bottleneck verdict (verdict.py) judges measured figures against
these values when the inventory gives no ``hydra_expect`` threshold. Add a SKU
by appending an entry; ``match`` lists groups of substrings that must all occur
(case-insensitively) in the nvidia-smi product name; the first matching entry
wins, so more specific entries come first (GH200 before H200).

Units: TFLOP/s (dense, no sparsity), TB/s for device memory, GB/s (10^9 B/s)
for host links, one direction.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from typing import Any

_STAS_ACCEL = "stas00/ml-engineering compute/accelerator/README.md (datasheet table)"
_STAS_MAMF = "stas00/ml-engineering compute/accelerator/README.md (MAMF, bf16, mean of 100 iterations)"
_STAS_NET = "stas00/ml-engineering network/README.md"
_MAG_BENCH = "mag-/gpu_benchmark README.md (bf16 matmul)"
_DCGM = "NVIDIA/DCGM nvvs/diag-skus.yaml.in (memory bandwidth DCGM measured; its threshold is 0.75x this)"

SKUS: list[dict[str, Any]] = [
    {
        "id": "gh200",
        "label": "GH200",
        "match": [["GH200"]],
        "bf16_tflops_peak": 989.0,
        "fp16_tflops_peak": 989.0,
        "fp32_tflops_peak": 67.0,
        "bf16_tflops_measured": 828.6,
        "memory_bandwidth_tbps": None,
        "memory_bandwidth_measured_tbps": None,
        "pcie_gen": None,  # host link is NVLink-C2C, not PCIe
        "pcie_width": None,
        "sources": {
            "bf16_tflops_peak": "828.6 is 83.8% of the datasheet in " + _STAS_MAMF,
            "fp16_tflops_peak": "same tensor-core rate as bf16 on Hopper, " + _STAS_ACCEL,
            "fp32_tflops_peak": "Hopper SXM FP32 rate, " + _STAS_ACCEL,
            "bf16_tflops_measured": _STAS_MAMF,
        },
    },
    {
        "id": "h200",
        "label": "H200",
        "match": [["H200"]],
        "bf16_tflops_peak": 989.0,
        "fp16_tflops_peak": 989.0,
        "fp32_tflops_peak": 67.0,
        "bf16_tflops_measured": None,
        "memory_bandwidth_tbps": 4.8,
        "memory_bandwidth_measured_tbps": None,
        "pcie_gen": 5,
        "pcie_width": 16,
        "h2d_gbps_measured": 55.43,
        "sources": {
            "bf16_tflops_peak": "NVIDIA H200 Tensor Core GPU datasheet (same tensor cores as H100 SXM)",
            "fp16_tflops_peak": "NVIDIA H200 Tensor Core GPU datasheet",
            "fp32_tflops_peak": "NVIDIA H200 Tensor Core GPU datasheet",
            "memory_bandwidth_tbps": "NVIDIA H200 Tensor Core GPU datasheet (HBM3e)",
            "pcie_gen": _STAS_NET + " (H200 with PCIe5 x16)",
            "h2d_gbps_measured": _STAS_NET + " (nvbandwidth H2D 55.43 GB/s, 88% of 63 GB/s)",
        },
    },
    {
        "id": "h100_pcie",
        "label": "H100 PCIe",
        "match": [["H100", "PCIE"]],
        "bf16_tflops_peak": 756.0,
        "fp16_tflops_peak": 756.0,
        "fp32_tflops_peak": 51.0,
        "bf16_tflops_measured": 499.5,
        "memory_bandwidth_tbps": 2.0,
        "memory_bandwidth_measured_tbps": None,
        "pcie_gen": 5,
        "pcie_width": 16,
        "sources": {
            "bf16_tflops_peak": _STAS_ACCEL,
            "fp16_tflops_peak": _STAS_ACCEL,
            "fp32_tflops_peak": _STAS_ACCEL,
            "bf16_tflops_measured": _MAG_BENCH,
            "memory_bandwidth_tbps": _STAS_ACCEL,
            "pcie_gen": _STAS_ACCEL,
        },
    },
    {
        # nvidia-smi names the SXM part "NVIDIA H100 80GB HBM3".
        "id": "h100_sxm",
        "label": "H100 SXM",
        "match": [["H100", "SXM"], ["H100", "HBM3"]],
        "bf16_tflops_peak": 989.0,
        "fp16_tflops_peak": 989.0,
        "fp32_tflops_peak": 67.0,
        "bf16_tflops_measured": 794.5,
        "memory_bandwidth_tbps": 3.35,
        "memory_bandwidth_measured_tbps": 2.54,
        "pcie_gen": 5,
        "pcie_width": 16,
        "sources": {
            "bf16_tflops_peak": _STAS_ACCEL,
            "fp16_tflops_peak": _STAS_ACCEL,
            "fp32_tflops_peak": _STAS_ACCEL,
            "bf16_tflops_measured": _STAS_MAMF,
            "memory_bandwidth_tbps": _STAS_ACCEL,
            "memory_bandwidth_measured_tbps": _DCGM + ", H100 80GB: 2,540,000 MB/s",
            "pcie_gen": _STAS_NET + " (PCIe5 x16, 63 GB/s one way)",
        },
    },
    {
        "id": "a100_sxm",
        "label": "A100 SXM",
        "match": [["A100", "SXM"]],
        "bf16_tflops_peak": 312.0,
        "fp16_tflops_peak": 312.0,
        "fp32_tflops_peak": 19.5,
        "bf16_tflops_measured": 271.2,
        "memory_bandwidth_tbps": 2.0,
        "memory_bandwidth_measured_tbps": 1.564,
        "pcie_gen": 4,
        "pcie_width": 16,
        "sources": {
            "bf16_tflops_peak": _STAS_ACCEL,
            "fp16_tflops_peak": _STAS_ACCEL,
            "fp32_tflops_peak": _STAS_ACCEL,
            "bf16_tflops_measured": _STAS_MAMF,
            "memory_bandwidth_tbps": _STAS_ACCEL + " (80GB)",
            "memory_bandwidth_measured_tbps": _DCGM + ", A100-SXM4-80GB: 1,564,000 MB/s",
            "pcie_gen": _STAS_NET + " (PCIe4 x16, 31 GB/s)",
        },
    },
    {
        # "NVIDIA A100-PCIE-40GB" and "NVIDIA A100 80GB PCIe".
        "id": "a100_pcie",
        "label": "A100 PCIe",
        "match": [["A100", "PCIE"]],
        "bf16_tflops_peak": 312.0,
        "fp16_tflops_peak": 312.0,
        "fp32_tflops_peak": 19.5,
        "bf16_tflops_measured": 252.9,
        "memory_bandwidth_tbps": 1.94,
        "memory_bandwidth_measured_tbps": 1.293,
        "pcie_gen": 4,
        "pcie_width": 16,
        "sources": {
            "bf16_tflops_peak": _STAS_ACCEL,
            "fp16_tflops_peak": _STAS_ACCEL,
            "fp32_tflops_peak": _STAS_ACCEL,
            "bf16_tflops_measured": _STAS_MAMF,
            "memory_bandwidth_tbps": _STAS_ACCEL + " (80GB PCIe)",
            "memory_bandwidth_measured_tbps": _DCGM + ", A100 PCIe: 1,293,000 MB/s",
            "pcie_gen": _STAS_NET,
        },
    },
    {
        "id": "l40s",
        "label": "L40S",
        "match": [["L40S"]],
        "bf16_tflops_peak": 362.05,
        "fp16_tflops_peak": 362.05,
        "fp32_tflops_peak": 91.6,
        "bf16_tflops_measured": 252.0,
        "memory_bandwidth_tbps": 0.864,
        "memory_bandwidth_measured_tbps": 0.7,
        "pcie_gen": 4,
        "pcie_width": 16,
        "sources": {
            "bf16_tflops_peak": "L40S datasheet table at mullet.se (362.05 dense, 733 with sparsity)",
            "fp16_tflops_peak": "L40S datasheet table at mullet.se",
            "fp32_tflops_peak": _STAS_ACCEL,
            "bf16_tflops_measured": _MAG_BENCH,
            "memory_bandwidth_tbps": _STAS_ACCEL + " (0.86 TB/s)",
            "memory_bandwidth_measured_tbps": _DCGM + ", L40S: 700,000 MB/s",
            "pcie_gen": _STAS_ACCEL,
        },
    },
    {
        # Volta has no bf16: the fp16 tensor-core rate is its reference.
        "id": "v100",
        "label": "V100",
        "match": [["V100"]],
        "bf16_tflops_peak": None,
        "fp16_tflops_peak": 125.0,
        "fp32_tflops_peak": 15.0,
        "bf16_tflops_measured": None,
        "memory_bandwidth_tbps": 0.9,
        "memory_bandwidth_measured_tbps": 0.81,
        "pcie_gen": 3,
        "pcie_width": 16,
        "sources": {
            "fp16_tflops_peak": "developer.nvidia.com/programming-tensor-cores-cuda-9-0 (125 TFLOPS)",
            "fp32_tflops_peak": "techrival.com (~15 TFLOPS FP32)",
            "memory_bandwidth_tbps": "m.leiphone.com (900 GB/s)",
            "memory_bandwidth_measured_tbps": _DCGM + ", V100 SXM2-32GB minimum 607,500 MB/s = 0.75x 810,000",
            "pcie_gen": _STAS_ACCEL,
        },
    },
]

# One-direction host link rate per lane in GB/s: transfer rate x encoding / 8 bits.
PCIE_GBPS_PER_LANE: dict[int, float] = {
    1: 0.25,    # 2.5 GT/s, 8b/10b
    2: 0.5,     # 5 GT/s, 8b/10b
    3: 0.985,   # 8 GT/s, 128b/130b
    4: 1.969,   # 16 GT/s, 128b/130b
    5: 3.938,   # 32 GT/s, 128b/130b
}
PCIE_SOURCE = ("PCI-SIG signalling rates and line encodings; x16 gives 15.75 (gen3), 31.5 (gen4) and 63 GB/s (gen5) "
               "one way, as in " + _STAS_NET)

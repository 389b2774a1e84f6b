# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The GPU SKU reference table and PCIe link rates: data only, each figure with its source.

profile's bottleneck verdict (_profile/verdict.py) and doctor's active checks
(_doctor/checks/active.py) judge measured figures against these values when
the inventory gives no ``hydra_expect`` threshold. Add a SKU
by appending an entry; ``match`` lists groups of substrings that must all occur
(case-insensitively) in the GPU's product name (nvidia-smi's, or amd-smi's / rocm-smi's for the AMD
entries, which carry ``"vendor": "amd"``); the first matching entry wins, so more specific entries come
first (GH200 before H200, MI250X before MI250).

Units: TFLOP/s (dense, no sparsity), TB/s for device memory, GB/s (10^9 B/s)
for host links, one direction.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Mapping, Sequence
from typing import Any, Optional

_STAS_ACCEL = "stas00/ml-engineering compute/accelerator/README.md (datasheet table)"
_STAS_MAMF = "stas00/ml-engineering compute/accelerator/README.md (MAMF, bf16, mean of 100 iterations)"
_STAS_NET = "stas00/ml-engineering network/README.md"
_MAG_BENCH = "mag-/gpu_benchmark README.md (bf16 matmul)"
_DCGM = "NVIDIA/DCGM nvvs/diag-skus.yaml.in (memory bandwidth DCGM measured; its threshold is 0.75x this)"
# nccl-tests all_reduce_perf bus bandwidth on 8 GPUs of one host, large messages. NCCL's ring over NVLink4 gets
# ~370 GB/s of the 450 GB/s line rate; NVLink SHARP (NVLS) reaches ~480 GB/s: the ring figure is the expectation
# (a single-process all-reduce may not use NVLS).
_NCCL_H100 = ("NVIDIA/nccl-tests issue #212 (sjeaugey: NVLink4 ring ~370 GB/s effective busbw, ~480 GB/s with NVLS on 8 GPUs); "
              "issue #272 (8x H200: 475 GB/s peak busbw)")
_NCCL_A100 = "NVIDIA/nccl-tests issue #149 (8x A100-SXM4-80GB over NVLink3: busbw ~200 GB/s)"
# AMD Instinct: AMD's datasheet figures (dense, no sparsity), as reproduced in the pages named. Matrix (MFMA) rates:
# CDNA runs bf16/fp16 and fp32 GEMMs on its matrix cores. An MI250/MI250X is two GCDs, each its own device to
# amd-smi, rocm-smi and torch: its entries hold one GCD's half of the module's figures, since a benchmark runs on one.
_AMD_MI210 = ("AMD Instinct MI210 specifications as tabled in https://www.anandtech.com/show/17326/"
              "amd-releases-instinct-mi210-accelerator-cdna-2-on-a-pcie-card (FP16 matrix 181 TFLOPS, FP32 matrix 45.3, "
              "1.6 TB/s HBM2e, PCIe 4.0)")
_AMD_MI250 = ("AMD Instinct MI250X/MI250 specifications (per OAM module: FP16/bf16 383.0 / 362.1 TFLOPS, FP32 matrix "
              "95.7 / 90.5, 3.2 TB/s HBM2e) as tabled in https://zexron.com/amd-mi250-x-aldebaran-as-mcm-with-up-to-479-"
              "teraflop-s-and-560-watt-tdp and https://yobitel.com/knowledge-base/amd-mi250; halved per GCD")
_AMD_MI300 = ("AMD Instinct MI300X / MI325X datasheets: bf16/fp16 1307.4 TFLOPS dense (2614.9 with sparsity), FP32 matrix "
              "163.4, as quoted in https://awesomeagents.ai/hardware/amd-mi325x (same 304 CUs as the MI300X)")
_AMD_MI300X_HBM = "AMD Instinct MI300X: 192 GB HBM3 at 5.3 TB/s, https://aiwiki.ai/wiki/amd_instinct_mi300x"
_AMD_MI325X_HBM = "AMD Instinct MI325X: 256 GB HBM3E at 6 TB/s, https://aiwiki.ai/wiki/amd_instinct_mi325x"
_AMD_PCIE5 = "PCIe Gen 5 x16 host interface, https://wiaix.com/amd-instincttm-mi325x-accelerators"

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
        "allreduce_busbw_gbps": 370.0,
        "sources": {
            "allreduce_busbw_gbps": _NCCL_H100,
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
        "allreduce_busbw_gbps": 370.0,
        "sources": {
            "allreduce_busbw_gbps": _NCCL_H100,
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
        "allreduce_busbw_gbps": 200.0,
        "sources": {
            "allreduce_busbw_gbps": _NCCL_A100,
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

SKUS.extend([
    {
        "id": "mi325x",
        "label": "MI325X",
        "vendor": "amd",
        "match": [["MI325X"]],
        "bf16_tflops_peak": 1307.4,
        "fp16_tflops_peak": 1307.4,
        "fp32_tflops_peak": 163.4,
        "bf16_tflops_measured": None,
        "memory_bandwidth_tbps": 6.0,
        "memory_bandwidth_measured_tbps": None,
        "pcie_gen": 5,
        "pcie_width": 16,
        "sources": {
            "bf16_tflops_peak": _AMD_MI300,
            "fp16_tflops_peak": _AMD_MI300,
            "fp32_tflops_peak": _AMD_MI300,
            "memory_bandwidth_tbps": _AMD_MI325X_HBM,
            "pcie_gen": _AMD_PCIE5,
        },
    },
    {
        # The unpartitioned (SPX) device: in CPX / DPX mode each logical GPU has a share of these figures.
        "id": "mi300x",
        "label": "MI300X",
        "vendor": "amd",
        "match": [["MI300X"]],
        "bf16_tflops_peak": 1307.4,
        "fp16_tflops_peak": 1307.4,
        "fp32_tflops_peak": 163.4,
        "bf16_tflops_measured": None,
        "memory_bandwidth_tbps": 5.3,
        "memory_bandwidth_measured_tbps": None,
        "pcie_gen": 5,
        "pcie_width": 16,
        "sources": {
            "bf16_tflops_peak": _AMD_MI300,
            "fp16_tflops_peak": _AMD_MI300,
            "fp32_tflops_peak": _AMD_MI300,
            "memory_bandwidth_tbps": _AMD_MI300X_HBM,
            "pcie_gen": _AMD_PCIE5 + " (MI325X, a drop-in for the MI300X platform)",
        },
    },
    {
        # One GCD of an MI250X module (the module's 383.0 TFLOPS, 3.2 TB/s are two of these).
        "id": "mi250x",
        "label": "MI250X (one GCD)",
        "vendor": "amd",
        "match": [["MI250X"]],
        "bf16_tflops_peak": 191.5,
        "fp16_tflops_peak": 191.5,
        "fp32_tflops_peak": 47.85,
        "bf16_tflops_measured": None,
        "memory_bandwidth_tbps": 1.6,
        "memory_bandwidth_measured_tbps": None,
        "pcie_gen": None,  # an OAM module: the host link depends on the platform (Infinity Fabric on Frontier)
        "pcie_width": None,
        "sources": {
            "bf16_tflops_peak": _AMD_MI250,
            "fp16_tflops_peak": _AMD_MI250,
            "fp32_tflops_peak": _AMD_MI250,
            "memory_bandwidth_tbps": _AMD_MI250,
        },
    },
    {
        # One GCD of an MI250 module; rocm-smi names it "AMD INSTINCT MI250 (MCM) OAM AC MBA".
        "id": "mi250",
        "label": "MI250 (one GCD)",
        "vendor": "amd",
        "match": [["MI250"]],
        "bf16_tflops_peak": 181.05,
        "fp16_tflops_peak": 181.05,
        "fp32_tflops_peak": 45.25,
        "bf16_tflops_measured": None,
        "memory_bandwidth_tbps": 1.6,
        "memory_bandwidth_measured_tbps": None,
        "pcie_gen": None,
        "pcie_width": None,
        "sources": {
            "bf16_tflops_peak": _AMD_MI250,
            "fp16_tflops_peak": _AMD_MI250,
            "fp32_tflops_peak": _AMD_MI250,
            "memory_bandwidth_tbps": _AMD_MI250,
        },
    },
    {
        "id": "mi210",
        "label": "MI210",
        "vendor": "amd",
        "match": [["MI210"]],
        "bf16_tflops_peak": 181.0,
        "fp16_tflops_peak": 181.0,
        "fp32_tflops_peak": 45.3,
        "bf16_tflops_measured": None,
        "memory_bandwidth_tbps": 1.6,
        "memory_bandwidth_measured_tbps": None,
        "pcie_gen": 4,
        "pcie_width": 16,
        "sources": {
            "bf16_tflops_peak": _AMD_MI210 + " (bf16 runs at the fp16 matrix rate on CDNA 2)",
            "fp16_tflops_peak": _AMD_MI210,
            "fp32_tflops_peak": _AMD_MI210,
            "memory_bandwidth_tbps": _AMD_MI210,
            "pcie_gen": _AMD_MI210,
        },
    },
])

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


# What a PCIe-only host's all-reduce can reach: NCCL's ring over PCIe is bounded by one link's one-way rate.
ALLREDUCE_PCIE_SOURCE = ("NCCL ring all-reduce busbw is bounded by the slowest link: over PCIe, one link's one-way rate "
                         "(NVIDIA/nccl-tests doc/PERFORMANCE.md: busbw is comparable to the hardware's peak bandwidth)")
# When only the datasheet peak is known, the matmul a healthy GPU sustains: the table's measured / peak ratios
# (MAMF) run from 0.66 to 0.87, median about 0.8.
MEASURED_OF_PEAK = 0.8

Sku = Mapping[str, Any]  # one entry of SKUS


def find_sku(name: Optional[str], sku_id: Optional[str] = None, skus: Optional[Sequence[Sku]] = None) -> Optional[Sku]:
    """The SKU entry for an nvidia-smi product name (or the explicit id), None when unknown."""
    skus = SKUS if skus is None else skus
    if sku_id:
        return next((sku for sku in skus if sku["id"] == sku_id), None)
    upper = (name or "").upper()
    for sku in skus:
        if any(all(part.upper() in upper for part in group) for group in sku["match"]):
            return sku
    return None


def link_rate_gbps(gen: Optional[int], width: Optional[int]) -> Optional[float]:
    """One-direction PCIe rate in GB/s, None when gen or width is unknown."""
    if not gen or not width or gen not in PCIE_GBPS_PER_LANE:
        return None
    return PCIE_GBPS_PER_LANE[gen] * width

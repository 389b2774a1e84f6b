"""gpu.topology judged on real recorded matrices, and on copies edited to plant one fault each."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import catalogue, registry
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus.topology import parse_rocm_showtopo, parse_topology
from ansible_collections.continuum.hydra.plugins.module_utils._status import FAIL, PASS, READ_ABSENT, READ_OK, SKIP, WARN
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture
from ansible_collections.continuum.hydra.tests.support.nvidia import GPU_CHECKS

CHECK = [c for c in catalogue.CATALOGUE if c.id == "gpu.topology"][0]
DGX_A100 = "oyanghd-8x-a100-sxm4-40gb-epyc7742-nps4-10nic.txt"
DGX_H100 = "dgx-h100-nv18-12nic-driver580-truncated.txt"


def sys_facts(**extra):
    facts = {"gpus": {}, "nics": {}, "numa_nodes": None, "sockets": None, "bound_cpus": None}
    facts.update(extra)
    return facts


def judge(text, expect=None, smi=None, parse=parse_topology, **facts):
    probes = {"topology": {"status": READ_OK, "data": {"topology": parse(text), "sys": sys_facts(**facts)}, "reason": None},
              "nvidia_smi": {"status": READ_OK, "data": smi, "reason": None} if smi else
              {"status": READ_ABSENT, "data": None, "reason": "absent"}}
    return registry.evaluate(CHECK, probes, expect or {})


def edit_cells(text, row, column, new):
    """The matrix with the (row, column) cell and its mirror set to new."""
    lines = text.splitlines()
    header = lines[0].split("\t")
    out = []
    for line in lines:
        cells = line.split("\t")
        if cells[0] == row and column in header:
            cells[header.index(column)] = new
        if cells[0] == column and row in header:
            cells[header.index(row)] = new
        out.append("\t".join(cells))
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name", [DGX_A100, DGX_H100, "della-i16g1-a100-4gpu-nv4.txt", "traverse-v100-4gpu-nvlink.txt",
                                  "stelline-asus-esc8000a-e12-4x-rtx6000ada-2socket-4nic.txt",
                                  "aws-p3-8xlarge-v100-nv1-nv2-numa-na.txt", "pcie-8gpu-no-nic-gpu-numa-id.txt",
                                  "dgx1-v100-8gpu-nv1-nv2-4mlx5-cpu-affinity-only.txt",
                                  "vastai-8x-v100-sxm2-nv1-nv2-1nic-driver580.txt", "old-soc-4gpu-mlx4-cpu-affinity-only.txt",
                                  "k80-4gpu-mlx4-oldest-legend-spaces.txt", "adroit-a100-4gpu-interleaved-cpus.txt"])
def test_well_built_boxes_pass_across_driver_generations(name):
    record = judge(read_fixture("nvidia-smi-topo", name), sockets=None)
    assert record["status"] == PASS, record["message"]
    assert len(record["details"]["gpus"]) >= 4


def test_dgx_a100_details_name_nic_nvlinks_numa_and_score():
    record = judge(read_fixture("nvidia-smi-topo", DGX_A100), bound_cpus="48-63,176-191")
    gpu0 = record["details"]["gpus"][0]
    assert gpu0["nearest_nic"] == "mlx5_0" and gpu0["nic_link"] == "PXB" and gpu0["nvlinks"]["GPU7"] == 12
    assert gpu0["numa_topo"] == "3" and gpu0["placement_score"] == pytest.approx(91.7, abs=0.1)
    assert record["details"]["gpus"][2]["placement_score"] < gpu0["placement_score"]  # job bound to GPU0's CPUs


def test_a_gpu_moved_off_its_nics_switch_warns_naming_it():
    text = read_fixture("nvidia-smi-topo", DGX_A100)
    text = edit_cells(edit_cells(text, "GPU1", "NIC0", "SYS"), "GPU1", "NIC1", "SYS")
    record = judge(text)
    assert record["status"] == WARN
    assert "no NIC at PXB or closer for GPU1 (nearest: mlx5_0 SYS) while 7 other GPU(s)" in record["message"]


def test_a_weaker_nvlink_pair_warns_and_fails_under_nvlinks_per_pair():
    text = edit_cells(read_fixture("nvidia-smi-topo", DGX_H100), "GPU2", "GPU5", "NV12")
    record = judge(text)
    assert record["status"] == WARN and "GPU pairs weaker than the box's NV18: GPU2-GPU5 NV12" in record["message"]
    failed = judge(text, expect={"nvlinks_per_pair": 18})
    assert failed["status"] == FAIL and "GPU2-GPU5 NV12" in failed["message"]
    assert judge(read_fixture("nvidia-smi-topo", DGX_H100), expect={"nvlinks_per_pair": 18})["status"] == PASS


def test_dgx1_pix_nics_and_a_gpu_moved_behind_the_host_bridge():
    text = read_fixture("nvidia-smi-topo", "dgx1-v100-8gpu-nv1-nv2-4mlx5-cpu-affinity-only.txt")
    assert judge(text)["status"] == PASS
    moved = judge(edit_cells(text, "GPU5", "mlx5_2", "PHB"))
    assert moved["status"] == WARN and "for GPU5 (nearest: mlx5_2 PHB)" in moved["message"]


def test_a_hybrid_mesh_is_not_judged_without_an_expectation():
    text = read_fixture("nvidia-smi-topo", "aws-p3-8xlarge-v100-nv1-nv2-numa-na.txt")
    record = judge(text)
    assert record["status"] == PASS and "no dominant NVLink count" in record["details"]["notes"][0]
    assert judge(text, expect={"nvlinks_per_pair": 2})["status"] == FAIL


def test_numa_hidden_warns():
    # numa=off on a two-socket box: one NUMA node with CPUs, every GPU on node 0.
    text = read_fixture("nvidia-smi-topo", "della-i16g1-a100-4gpu-nv4.txt")
    record = judge(text.replace("\t1\n", "\t0\n"), sockets=2, numa_nodes=1)
    assert record["status"] == WARN and "2 CPU sockets but 1 NUMA node(s)" in record["message"]
    hidden = judge(text.replace("\t0\n", "\tN/A\n").replace("\t1\n", "\tN/A\n"), numa_nodes=2)
    assert hidden["status"] == WARN and "NUMA affinity hidden (N/A) for GPU0, GPU1, GPU2, GPU3" in hidden["message"]


def test_numa_contradicting_sys_warns_naming_the_gpu():
    text = read_fixture("nvidia-smi-topo", "della-i16g1-a100-4gpu-nv4.txt")
    gpus = dict(("0000:%02x:00.0" % bus, {"numa_node": node, "local_cpulist": None})
                for bus, node in ((0x07, 0), (0x0b, 0), (0x48, 0), (0x4c, 1)))
    smi = {"gpus": [{"index": i, "pci_bus_id": "00000000:%02X:00.0" % bus} for i, bus in enumerate((7, 11, 0x48, 0x4c))]}
    record = judge(text, smi=smi, gpus=gpus)
    assert record["status"] == WARN
    assert "NUMA affinity contradicts /sys for GPU2 (topo 1, /sys 0000:48:00.0 numa_node 0)" in record["message"]
    assert record["details"]["gpus"][2]["pci_address"] == "0000:48:00.0"


def test_single_gpu_without_nic_skips_and_with_nics_is_judged():
    one = "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-7\t0\n"
    assert judge(one)["status"] == SKIP
    assert judge(read_fixture("nvidia-smi-topo", "traverse-v100-1gpu-slurm-job.txt"))["status"] == PASS


def test_the_check_sits_after_the_gpu_checks_and_reads_the_topology_probe():
    modules = [c.func.__module__.rsplit(".", 1)[1] for c in catalogue.CATALOGUE]
    position = modules.index("topology")
    gpu_modules = set(c.func.__module__.rsplit(".", 1)[1] for c in GPU_CHECKS)
    assert gpu_modules <= set(modules[:position]) and not gpu_modules & set(modules[position:]) and "system" not in modules[:position]
    assert CHECK.probes == ("topology", "nvidia_smi") and "Remediation" in CHECK.rule


def test_amd_showtopo_feeds_the_same_check():
    record = judge(read_fixture("rocm-smi-topo", "mi300x-8gpu-xgmi-rocm72.txt"), parse=parse_rocm_showtopo)
    assert record["status"] == PASS and record["details"]["source"] == "rocm-smi"
    assert record["details"]["gpus"][4]["numa_topo"] == "1"


def _della_lines():
    return read_fixture("nvidia-smi-topo", "della-i16g1-a100-4gpu-nv4.txt").splitlines()


def test_a_gpu_row_missing_or_a_garbled_cell_is_error_never_pass():
    lines = _della_lines()
    result = judge("\n".join(line for line in lines if not line.startswith("GPU2")))
    assert result["status"] == "ERROR" and "GPU2: in the header, no row" in result["message"]
    result = judge("\n".join(lines).replace("NV4", "zz", 1))
    assert result["status"] == "ERROR" and "'zz' not a link kind" in result["message"]


def test_a_cut_matrix_of_one_readable_gpu_is_error_not_skip():
    lines = _della_lines()
    result = judge("\n".join(lines[:2]))  # the header and GPU0's row: GPU1-3 and the NIC cut off
    assert result["status"] == "ERROR" and "GPU1, GPU2, GPU3: in the header, no row" in result["message"]


def test_fewer_gpus_in_the_matrix_than_nvidia_smi_lists_is_error():
    smi = {"gpus": [{"index": n, "pci_bus_id": "00000000:%02X:00.0" % n} for n in range(5)]}
    result = judge("\n".join(_della_lines()), smi=smi)
    assert result["status"] == "ERROR" and "nvidia-smi lists 5 GPUs, its topology matrix 4" in result["message"]

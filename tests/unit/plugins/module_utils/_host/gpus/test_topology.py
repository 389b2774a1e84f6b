"""nvidia-smi topo -m and rocm-smi --showtopo parsed from real recordings of every driver generation at hand."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import topology as topo
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path, read_fixture

# fixture -> (GPUs, NIC rows, GPU0's link to GPU1, affinity labels present, GPU0's NUMA affinity)
NVIDIA = {
    "della-a100-2gpu.txt": (2, 2, "SYS", "0"),
    "traverse-v100-4gpu-nvlink.txt": (4, 4, "NV3", "0"),
    "traverse-v100-4gpu-nv3-cpu-affinity-only.txt": (4, 4, "NV3", None),
    "traverse-v100-1gpu-slurm-job.txt": (1, 4, None, "0,8,252-255"),
    "della-i16g1-a100-4gpu-nv4.txt": (4, 1, "NV4", "0"),
    "adroit-a100-4gpu-interleaved-cpus.txt": (4, 1, "NODE", "0"),
    "aws-p3-8xlarge-v100-nv1-nv2-numa-na.txt": (4, 0, "NV1", "N/A"),
    "v100-4gpu-nv1-nv2-mlx5-cpu-affinity-only.txt": (4, 1, "NV1", None),
    "oyanghd-8x-a100-sxm4-40gb-epyc7742-nps4-10nic.txt": (8, 10, "NV12", "3"),
    "dgx-h100-nv18-12nic-driver580-truncated.txt": (8, 6, "NV18", "0"),
    "pcie-8gpu-no-nic-gpu-numa-id.txt": (8, 0, "NODE", "0"),
    "stelline-asus-esc8000a-e12-4x-rtx6000ada-2socket-4nic.txt": (4, 4, "NODE", "0"),
    "stelline-puget-wrx90-2x-rtx6000ada-2nic.txt": (2, 2, "PHB", "0"),
    "dgx1-v100-8gpu-nv1-nv2-4mlx5-cpu-affinity-only.txt": (8, 4, "NV1", None),
    "vastai-8x-v100-sxm2-nv1-nv2-1nic-driver580.txt": (8, 1, "NV1", "0"),
    "old-soc-4gpu-mlx4-cpu-affinity-only.txt": (4, 1, "PHB", None),
    "k80-4gpu-mlx4-oldest-legend-spaces.txt": (4, 1, "PIX", None),
}


@pytest.mark.parametrize("name", sorted(NVIDIA))
def test_every_recorded_matrix_parses(name):
    gpus, nics, link, numa = NVIDIA[name]
    parsed = topo.parse_topology(read_fixture("nvidia-smi-topo", name))
    assert len(parsed["gpus"]) == gpus and len(parsed["nics"]) == nics and parsed["problems"] == []
    assert parsed["links"]["GPU0"].get("GPU1") == link
    assert parsed["numa_affinity"].get("GPU0") == numa
    assert set(parsed["cpu_affinity"]) == set(parsed["gpus"])  # every GPU row has its CPU Affinity cell
    for gpu in parsed["gpus"]:
        assert gpu not in parsed["links"][gpu]  # the X cell is never a link


def test_nic_legend_maps_nic_columns_to_rdma_devices():
    parsed = topo.parse_topology(read_fixture("nvidia-smi-topo", "oyanghd-8x-a100-sxm4-40gb-epyc7742-nps4-10nic.txt"))
    assert parsed["nic_names"]["NIC9"] == "mlx5_9" and topo.rdma_name(parsed, "NIC3") == "mlx5_3"
    assert topo.nearest_nic(parsed, "GPU4") == ("NIC4", "PXB")
    old = topo.parse_topology(read_fixture("nvidia-smi-topo", "traverse-v100-4gpu-nvlink.txt"))
    assert old["nic_names"] == {} and topo.rdma_name(old, "mlx5_2") == "mlx5_2"
    one = topo.parse_topology(read_fixture("nvidia-smi-topo", "vastai-8x-v100-sxm2-nv1-nv2-1nic-driver580.txt"))
    assert one["nic_names"] == {"NIC0": "mlx5_2"} and one["links"]["NIC0"]["GPU4"] == "SYS"


def test_gpu_numa_id_column_and_padding_tabs_before_na():
    parsed = topo.parse_topology(read_fixture("nvidia-smi-topo", "dgx-h100-nv18-12nic-driver580-truncated.txt"))
    assert parsed["gpu_numa_id"]["GPU7"] == "N/A" and parsed["numa_affinity"]["GPU7"] == "1"
    assert parsed["cpu_affinity"]["GPU4"] == "56-111,168-223"
    assert parsed["nvlinks"]["GPU3"] == dict(("GPU%d" % i, 18) for i in range(8) if i != 3)
    assert parsed["links"]["GPU0"]["NIC11"] == "SYS"  # a column whose row the copy lost still counts


def test_an_empty_cpu_affinity_cell_is_not_filled_by_the_next_column():
    # A real row shape (driver 580, GPUs outside the job's cpuset print no CPU Affinity).
    text = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
            "GPU0\t X \tNV18\t44-51,148-155\t0\t\tN/A\nGPU1\tNV18\t X \t\t1\t\tN/A\n")
    parsed = topo.parse_topology(text)
    assert parsed["cpu_affinity"] == {"GPU0": "44-51,148-155", "GPU1": ""}
    assert parsed["numa_affinity"] == {"GPU0": "0", "GPU1": "1"} and parsed["gpu_numa_id"]["GPU1"] == "N/A"


def test_tabs_and_spaces_give_the_same_matrix():
    tabbed = read_fixture("nvidia-smi-topo", "traverse-v100-4gpu-nvlink.txt")
    spaced = "\n".join("  ".join(cell.strip() or "" for cell in line.split("\t")) for line in tabbed.splitlines())
    one, two = topo.parse_topology(tabbed), topo.parse_topology(spaced)
    assert one["links"] == two["links"] and one["cpu_affinity"] == two["cpu_affinity"]
    assert one["numa_affinity"] == two["numa_affinity"]


def test_soc_of_old_drivers_reads_as_sys():
    parsed = topo.parse_topology(read_fixture("nvidia-smi-topo", "old-soc-4gpu-mlx4-cpu-affinity-only.txt"))
    assert parsed["links"]["GPU0"]["mlx4_0"] == "SYS" and parsed["links"]["mlx4_0"]["GPU2"] == "PHB"
    assert parsed["cpu_affinity"] == {"GPU0": "0-5", "GPU1": "0-5", "GPU2": "6-11", "GPU3": "6-11"}
    assert topo.link_rank("SYS") > topo.link_rank("NODE") > topo.link_rank("PXB")


def test_no_matrix_is_none_and_a_short_row_is_a_problem_not_a_crash():
    assert topo.parse_topology("") is None and topo.parse_topology("No devices were found") is None
    cut = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-3\nGPU1\tNV4\n"
    parsed = topo.parse_topology(cut)
    assert parsed["problems"] == ["row GPU1: 1 matrix cells for 2 columns"]
    # A pasted copy that glued two header names ("NIC8NIC9", seen in a vLLM issue) leaves rows longer than the header.
    glued = "\tGPU0\tNIC0NIC1\tCPU Affinity\nGPU0\t X \tPXB\tSYS\t0-3\n"
    assert topo.parse_topology(glued)["problems"] == ["row GPU0: 1 more link cells than the header has columns (a damaged copy?)"]


@pytest.mark.parametrize("name, link, weight, hops, numa", [
    ("mi300x-8gpu-xgmi-rocm72.txt", "XGMI", 15, 1, {"GPU0": "0", "GPU7": "1"}),
    ("mi50-4gpu-pcie-rocm721.txt", "PCIE", 40, 2, {"GPU0": "0", "GPU3": "0"}),
])
def test_rocm_smi_showtopo(name, link, weight, hops, numa):
    parsed = topo.parse_rocm_showtopo(read_fixture("rocm-smi-topo", name))
    assert parsed["source"] == "rocm-smi" and parsed["problems"] == []
    assert set(parsed["links"]["GPU1"].values()) == {link} and "GPU1" not in parsed["links"]["GPU1"]
    assert parsed["weights"]["GPU0"]["GPU1"] == weight and parsed["hops"]["GPU1"]["GPU0"] == hops
    for gpu, node in numa.items():
        assert parsed["numa_affinity"][gpu] == node
    assert topo.parse_rocm_showtopo("") is None


def test_placement_score_formula():
    parsed = topo.parse_topology(read_fixture("nvidia-smi-topo", "oyanghd-8x-a100-sxm4-40gb-epyc7742-nps4-10nic.txt"))
    best = topo.placement(parsed, "GPU0", bound_cpus="48-63")
    assert best["score"] == pytest.approx(100 * (1 - 0.25 / 3), abs=0.1) and best["nic_link"] == "PXB"
    wrong_cpus = topo.placement(parsed, "GPU0", bound_cpus="0-15", weights={"numa": 0, "pcie": 0, "cpu": 1})
    assert wrong_cpus["score"] == 0.0
    across = topo.placement(topo.parse_topology(read_fixture("nvidia-smi-topo", "della-i16g1-a100-4gpu-nv4.txt")), "GPU2")
    assert across["distances"] == {"pcie": 1.0, "numa": 1.0} and across["score"] == 0.0
    assert topo.placement(topo.parse_topology(read_fixture("nvidia-smi-topo", "pcie-8gpu-no-nic-gpu-numa-id.txt")),
                          "GPU0")["score"] is None


def test_sys_facts_from_a_laid_out_tree(tmp_path):
    gpu = tmp_path / "sys/bus/pci/devices/0000:1b:00.0"
    gpu.mkdir(parents=True)
    for name, value in (("vendor", "0x10de"), ("class", "0x030200"), ("device", "0x2330"), ("numa_node", "-1"),
                        ("local_cpulist", "0-55,112-167")):
        (gpu / name).write_text(value + "\n")
    ib = tmp_path / "sys/class/infiniband/mlx5_0"
    ib.mkdir(parents=True)
    nic = tmp_path / "sys/bus/pci/devices/0000:1a:00.0"
    nic.mkdir(parents=True)
    (nic / "numa_node").write_text("0\n")
    (ib / "device").symlink_to(nic)
    facts = topo.read_sys_facts(str(tmp_path))
    assert facts["gpus"]["0000:1b:00.0"]["numa_node"] is None and facts["gpus"]["0000:1b:00.0"]["numa_node_raw"] == "-1"
    assert facts["nics"]["mlx5_0"]["address"] == "0000:1a:00.0" and facts["nics"]["mlx5_0"]["numa_node"] == 0
    assert fixture_path("rocm-smi-topo", "mi50-4gpu-pcie-rocm721.txt")


DELLA = "della-i16g1-a100-4gpu-nv4.txt"


def test_a_gpu_row_lost_or_a_cell_that_is_no_link_kind_is_a_problem():
    lines = read_fixture("nvidia-smi-topo", DELLA).splitlines()
    assert topo.parse_topology("\n".join(lines))["problems"] == []
    cut = topo.parse_topology("\n".join(line for line in lines if not line.startswith("GPU2")))
    assert cut["problems"] == ["GPU2: in the header, no row (output cut?)"]
    garbled = topo.parse_topology("\n".join(lines).replace("NV4", "N/A", 1))
    assert garbled["problems"] == ["row GPU0: 'N/A' not a link kind (X, NV#, PIX, PXB, PHB, NODE, SYS)"]


@pytest.mark.parametrize("text", ["0-4294967295", "0-70000", "9-3"])
def test_a_cpulist_too_large_or_reversed_is_not_a_cpulist(text):
    assert topo.cpulist(text) is None  # never a set of billions of CPUs (a hang)


def test_an_nv_cell_with_a_5000_digit_count_is_a_problem_not_a_crash():
    # Issue 23: int() of 5,000 digits raised out of the parser, and the topology probe crashed.
    text = read_fixture("nvidia-smi-topo", "traverse-v100-4gpu-nvlink.txt").replace("NV3", "NV" + "3" * 5000, 1)
    parsed = topo.parse_topology(text)
    assert len(parsed["gpus"]) == 4 and any("not a link kind" in problem for problem in parsed["problems"])

"""Stack checks (environment.*, cuda.*, pytorch.*, gpu.device_properties, nccl.*) as pure functions of probe data.

Probe data comes from outputs recorded on this machine (tests/fixtures/hosts/debian12-vm: the host probe,
the torch probe with torch 2.13.0+cpu and without torch, nvcc 13.0) and from the real nvidia-smi XML of
GPU hosts (tests/fixtures/nvidia-smi). GPU situations that cannot exist here are planted by editing a copy
of the recorded torch output (a CUDA build, available devices, the driver-too-old warning torch prints).
"""

import copy
import json
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks import registry
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.checks.catalogue import CATALOGUE
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import host as host_probe
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes.stack import parse_nvcc_version
from ansible_collections.continuum.hydra.tests.support.envelopes import absent, ok
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture
from ansible_collections.continuum.hydra.tests.support.host_tree import copy_host_tree

HOST = "debian12-vm"
# What torch prints when its CUDA is newer than the driver (torch/cuda/__init__.py UserWarning, first line).
DRIVER_TOO_OLD = ("CUDA initialization: The NVIDIA driver on your system is too old (found version 11070). Please update your "
                  "GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
                  "Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your "
                  "version of the CUDA driver. (Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:109.)")


def failed(reason):
    return {"status": "error", "data": None, "reason": reason}


def torch_cpu():
    return json.loads(read_fixture("hosts", HOST, "cmd", "torch-probe.json"))


def torch_missing():
    return json.loads(read_fixture("hosts", HOST, "cmd", "torch-probe-no-torch.json"))


def smi(fixture):
    """The nvidia_smi probe's top-level keys (driver_version, cuda_version, gpus[]) from a real XML record."""
    root = ET.fromstring(read_fixture("nvidia-smi", fixture))
    gpus = [{"index": i, "name": g.findtext("product_name"), "uuid": g.findtext("uuid"), "pci_bus_id": g.get("id"),
             "fb_total_mib": int(g.findtext("fb_memory_usage/total").split()[0])}
            for i, g in enumerate(root.findall("gpu"))]
    return ok({"driver_version": root.findtext("driver_version"), "cuda_version": root.findtext("cuda_version"),
               "attached_gpus": len(gpus), "gpus": gpus})


NO_SMI = absent("nvidia-smi not found on PATH")


def torch_cuda_host(smi_envelope, cuda_build="12.1", **edits):
    """The recorded torch output edited into what a CUDA wheel reports on the GPUs of smi_envelope."""
    data = torch_cpu()
    gpus = smi_envelope["data"]["gpus"]
    data.update({"version": "2.5.1+cu%s" % cuda_build.replace(".", ""), "cuda_build": cuda_build, "cudnn_version": 90100,
                 "cuda_available": True, "device_count": len(gpus), "nccl_available": True, "nccl_version": "2.21.5",
                 "devices": [{"index": g["index"], "name": g["name"], "capability": "8.0",
                              "total_memory_bytes": g["fb_total_mib"] * 2 ** 20,
                              "multi_processor_count": 108, "uuid": g["uuid"], "pci_bus_id": g["pci_bus_id"]} for g in gpus]})
    data.pop("nccl_error")
    data.update(edits)
    return ok(data)


def host_data(tmp_path, environ=None):
    copy_host_tree(tmp_path)
    return host_probe.probe_host({}, root=str(tmp_path), environ=environ or {})


def judge(check_id, expect=None, **probes):
    chk = [c for c in CATALOGUE if c.id == check_id][0]
    envelopes = dict((name, probes.get(name, absent("not given"))) for name in chk.probes)
    return registry.evaluate(chk, envelopes, expect or {})


# ---------------------------------------------------------------- environment

def test_python_version(tmp_path):
    host = host_data(tmp_path)
    record = judge("environment.python_version", host=ok(host))
    assert record["status"] == "PASS" and record["message"] == "Python %s (%s)" % (host["python_version"], host["python_executable"])
    old = dict(host, python_version="3.8.10", python_executable="/usr/bin/python3")
    record = judge("environment.python_version", host=ok(old))
    assert record["status"] == "FAIL" and record["message"] == "Python 3.8.10 at /usr/bin/python3 is older than 3.9"
    assert record["remediation"]


def test_venv(tmp_path):
    host = host_data(tmp_path)
    assert judge("environment.venv", host=ok(host), torch=ok(torch_cpu()))["message"] == "virtualenv at /tmp/torchvenv-explore"
    system_python = torch_cpu()
    system_python.update(python="/usr/bin/python3", prefix="/usr", base_prefix="/usr")
    record = judge("environment.venv", host=ok(host), torch=ok(system_python))
    assert record["status"] == "WARN" and "system interpreter /usr/bin/python3" in record["message"]
    in_docker = dict(host, is_container=True, container_runtime="docker")
    assert judge("environment.venv", host=ok(in_docker), torch=ok(system_python))["message"] == \
        "system interpreter /usr/bin/python3 inside a docker container"
    conda = dict(system_python, conda=True, prefix="/opt/conda/envs/train")
    assert judge("environment.venv", host=ok(host), torch=ok(conda))["message"] == "conda environment at /opt/conda/envs/train"
    # torch probe failed: judge the module's own interpreter
    module_venv = dict(host, sys_prefix="/srv/venv", sys_base_prefix="/usr")
    assert judge("environment.venv", host=ok(module_venv), torch=failed("timed out"))["message"] == "virtualenv at /srv/venv"


def test_runtime_is_informational(tmp_path):
    host = host_data(tmp_path)
    assert judge("environment.runtime", host=ok(host))["message"] == "VM (unknown hypervisor)"
    docker_on_ec2 = dict(host, container_runtime="docker", is_container=True, hypervisor="Amazon EC2")
    record = judge("environment.runtime", host=ok(docker_on_ec2))
    assert record["status"] == "PASS" and record["message"] == "docker container on VM (Amazon EC2)"
    bare = dict(host, is_vm=False, hypervisor=None)
    assert judge("environment.runtime", host=ok(bare))["message"] == "bare metal"


# ---------------------------------------------------------------- CUDA

def nvcc_here():
    data = parse_nvcc_version(read_fixture("hosts", HOST, "cmd", "nvcc--version.txt"))
    data["path"] = "/usr/local/bin/nvcc"
    return ok(data)


def test_toolkit_nvcc_against_driver_and_torch():
    record = judge("cuda.toolkit_nvcc", nvcc=nvcc_here(), nvidia_smi=smi("rtx-3080-v13.xml"), torch=ok(torch_cpu()))
    assert record["status"] == "PASS" and record["message"] == "nvcc 13.0.88 (/usr/local/bin/nvcc)"
    record = judge("cuda.toolkit_nvcc", nvcc=nvcc_here(), nvidia_smi=smi("a100-sxm4-v12.xml"), torch=ok(torch_cpu()))
    assert record["status"] == "WARN" and "newer than the driver's CUDA 12.2" in record["message"]
    a100 = smi("a100-sxm4-v12.xml")
    record = judge("cuda.toolkit_nvcc", nvcc=nvcc_here(), nvidia_smi=smi("rtx-3080-v13.xml"), torch=torch_cuda_host(a100, "12.4"))
    assert record["status"] == "WARN" and "differs from torch's CUDA 12.4" in record["message"]
    record = judge("cuda.toolkit_nvcc", nvcc=absent("no CUDA toolkit: nvcc is not on PATH (not needed for PyTorch wheels)"))
    assert record["status"] == "SKIP" and "not needed for PyTorch wheels" in record["message"]


def test_torch_cuda_version_and_expectation():
    a100 = smi("a100-sxm4-v12.xml")
    assert judge("cuda.torch_cuda_version", torch=ok(torch_cpu()))["status"] == "SKIP"
    record = judge("cuda.torch_cuda_version", {"torch_cuda_version": "12.4"}, torch=ok(torch_cpu()))
    assert record["status"] == "WARN" and "a CPU-only build, expected CUDA 12.4" in record["message"]
    assert judge("cuda.torch_cuda_version", {"torch_cuda_version": "12"}, torch=torch_cuda_host(a100, "12.4"))["status"] == "PASS"
    record = judge("cuda.torch_cuda_version", {"torch_cuda_version": "12.1"}, torch=torch_cuda_host(a100, "12.4"))
    assert record["status"] == "WARN" and "built for CUDA 12.4, expected CUDA 12.1" in record["message"]
    assert judge("cuda.torch_cuda_version", torch=ok(torch_missing()))["message"].startswith("PyTorch is not installed")


def test_driver_cuda_compat():
    a100 = smi("a100-sxm4-v12.xml")  # driver supports CUDA 12.2
    assert judge("cuda.driver_cuda_compat", torch=torch_cuda_host(a100, "12.1"), nvidia_smi=a100)["status"] == "PASS"
    record = judge("cuda.driver_cuda_compat", torch=torch_cuda_host(a100, "12.4"), nvidia_smi=a100)
    assert record["status"] == "WARN" and "minor-version compatibility" in record["message"]
    record = judge("cuda.driver_cuda_compat", torch=torch_cuda_host(a100, "13.0"), nvidia_smi=a100)
    assert record["status"] == "FAIL"
    assert record["message"] == "torch 2.5.1+cu130 needs CUDA 13.0 but the driver supports only CUDA 12.2"
    record = judge("cuda.driver_cuda_compat", torch=torch_cuda_host(a100, "12.4"), nvidia_smi=failed("nvidia-smi timed out after 30s"))
    assert record["status"] == "SKIP" and "nvidia-smi timed out" in record["message"]
    assert judge("cuda.driver_cuda_compat", torch=ok(torch_cpu()), nvidia_smi=a100)["status"] == "SKIP"


def test_runtime_hint_gives_the_fix():
    a100 = smi("a100-sxm4-v12.xml")
    record = judge("cuda.runtime_hint", torch=ok(torch_cpu()), nvidia_smi=a100)
    assert record["status"] == "WARN"
    assert record["message"].startswith("torch 2.13.0+cpu is a CPU-only build on a host with 1 NVIDIA GPU(s): install a CUDA build")
    assert "CUDA 12.2 or older" in record["message"]
    a10g = smi("a10g.xml")  # driver supports CUDA 11.7
    too_old = torch_cuda_host(a10g, "12.4", cuda_available=False, device_count=0, devices=[], cuda_warnings=[DRIVER_TOO_OLD])
    record = judge("cuda.runtime_hint", torch=too_old, nvidia_smi=a10g)
    assert record["status"] == "WARN" and record["message"].startswith("the driver (CUDA 11.7) is too old for torch 2.5.1+cu124")
    hidden = torch_cuda_host(a100, "12.1", cuda_available=False, device_count=0, devices=[], cuda_visible_devices="")
    record = judge("cuda.runtime_hint", torch=hidden, nvidia_smi=a100)
    assert record["status"] == "WARN" and record["message"].startswith("CUDA_VISIBLE_DEVICES='' hides every GPU")
    assert judge("cuda.runtime_hint", torch=torch_cuda_host(a100), nvidia_smi=a100)["status"] == "PASS"
    assert judge("cuda.runtime_hint", torch=ok(torch_cpu()), nvidia_smi=NO_SMI)["status"] == "PASS"
    record = judge("cuda.runtime_hint", torch=ok(torch_cpu()), nvidia_smi=failed("nvidia-smi exited with rc 9"))
    assert record["status"] == "WARN" and "fix the driver first" in record["message"]


# ---------------------------------------------------------------- PyTorch

def test_installed_depends_on_the_host_and_the_expectation():
    a100 = smi("a100-sxm4-v12.xml")
    assert judge("pytorch.installed", torch=ok(torch_missing()), nvidia_smi=NO_SMI)["status"] == "SKIP"
    record = judge("pytorch.installed", torch=ok(torch_missing()), nvidia_smi=a100)
    assert record["status"] == "WARN" and "on a host with 1 NVIDIA GPU(s)" in record["message"]
    assert judge("pytorch.installed", {"torch_required": True}, torch=ok(torch_missing()), nvidia_smi=NO_SMI)["status"] == "FAIL"
    assert judge("pytorch.installed", {"torch_required": False}, torch=ok(torch_missing()), nvidia_smi=a100)["status"] == "SKIP"
    broken = dict(torch_missing(), installed=True, import_error="OSError: libcudart.so.12: cannot open shared object file")
    record = judge("pytorch.installed", torch=ok(broken), nvidia_smi=a100)
    assert record["status"] == "FAIL" and "does not import: OSError: libcudart.so.12" in record["message"]
    assert judge("pytorch.installed", torch=ok(torch_cpu()), nvidia_smi=NO_SMI)["status"] == "PASS"
    # every other torch check SKIPs a broken install instead of judging it
    assert judge("pytorch.cuda_available", torch=ok(broken), nvidia_smi=a100)["message"].startswith("PyTorch does not import")


def test_cuda_available():
    a100 = smi("a100-sxm4-v12.xml")
    record = judge("pytorch.cuda_available", torch=ok(torch_cpu()), nvidia_smi=a100)
    assert record["status"] == "FAIL" and "nvidia-smi lists 1 GPU(s)" in record["message"]
    assert judge("pytorch.cuda_available", torch=ok(torch_cpu()), nvidia_smi=NO_SMI)["status"] == "SKIP"
    assert judge("pytorch.cuda_available", torch=ok(torch_cpu()), nvidia_smi=failed("rc 9"))["status"] == "WARN"
    assert judge("pytorch.cuda_available", torch=torch_cuda_host(a100), nvidia_smi=a100)["message"] == \
        "CUDA available to torch 2.5.1+cu121: 1 device(s)"


def test_pytorch_version_expectation_compares_whole_components():
    a100 = smi("a100-sxm4-v12.xml")
    assert judge("pytorch.cuda_version", {"torch_version": "2.13"}, torch=ok(torch_cpu()))["status"] == "PASS"
    assert judge("pytorch.cuda_version", {"torch_version": "2.1"}, torch=ok(torch_cpu()))["status"] == "WARN"  # 2.13 is not 2.1
    record = judge("pytorch.cuda_version", torch=torch_cuda_host(a100, "12.4"))
    assert record["message"] == "torch 2.5.1+cu124, CUDA 12.4, cuDNN 90100"
    record = judge("pytorch.cuda_version", torch=torch_cuda_host(a100, "12.4", cudnn_version=None))
    assert record["status"] == "WARN" and "without a loadable cuDNN" in record["message"]


def test_device_properties_per_gpu():
    a100 = smi("a100-sxm4-v12.xml")
    record = judge("gpu.device_properties", torch=torch_cuda_host(a100), nvidia_smi=a100)
    assert record["status"] == "PASS" and record["message"] == "1 device(s): NVIDIA A100-SXM4-80GB (sm_80, 80 GiB, 108 SMs)"
    gpu = record["details"]["gpus"][0]
    assert (gpu["index"], gpu["uuid"], gpu["pci_bus_id"]) == (0, a100["data"]["gpus"][0]["uuid"], a100["data"]["gpus"][0]["pci_bus_id"])
    two = copy.deepcopy(a100)
    two["data"]["gpus"].append(dict(two["data"]["gpus"][0], index=1))
    record = judge("gpu.device_properties", torch=torch_cuda_host(a100), nvidia_smi=two)
    assert record["status"] == "WARN" and record["message"] == "torch sees 1 of the 2 GPUs nvidia-smi lists"
    limited = torch_cuda_host(a100, cuda_visible_devices="0")
    assert judge("gpu.device_properties", torch=limited, nvidia_smi=two)["status"] == "PASS"
    assert judge("gpu.device_properties", torch=ok(torch_cpu()), nvidia_smi=NO_SMI)["status"] == "SKIP"


# ---------------------------------------------------------------- NCCL

def ib_ports(*states):
    return ok({"ports": [{"device": "mlx5_%d" % i, "port": 1, "state": s, "phys_state": "LinkUp", "rate_gbps": 400.0}
                         for i, s in enumerate(states)]})


def test_env_config_flags_risky_settings_with_their_source(tmp_path):
    assert judge("nccl.env_config", host=ok(host_data(tmp_path)))["message"] == "no NCCL_* settings: NCCL defaults"
    host = host_data(tmp_path, {"NCCL_P2P_DISABLE": "1", "NCCL_DEBUG": "INFO"})
    record = judge("nccl.env_config", host=ok(host))
    assert record["status"] == "WARN"
    assert record["message"].startswith("NCCL_P2P_DISABLE=1 (environment): disables NVLink/PCIe peer-to-peer")
    assert [r["variable"] for r in record["details"]["risky"]] == ["NCCL_P2P_DISABLE"]  # NCCL_DEBUG=INFO is fine
    ib_off = host_data(tmp_path, {"NCCL_IB_DISABLE": "1"})
    assert judge("nccl.env_config", host=ok(ib_off), infiniband=absent("no RDMA"))["status"] == "PASS"
    assert judge("nccl.env_config", host=ok(ib_off), infiniband=ib_ports("ACTIVE"))["status"] == "WARN"
    (tmp_path / "etc/nccl.conf").write_text("NCCL_DEBUG=TRACE\nNCCL_ALGO=Ring\n")
    record = judge("nccl.env_config", host=ok(host_probe.probe_host({}, root=str(tmp_path), environ={})))
    assert record["status"] == "WARN" and record["message"].endswith("(and 1 more)")
    assert set((r["variable"], r["source"]) for r in record["details"]["risky"]) == {
        ("NCCL_ALGO", str(tmp_path / "etc/nccl.conf")), ("NCCL_DEBUG", str(tmp_path / "etc/nccl.conf"))}


def test_torch_backend():
    a100 = smi("a100-sxm4-v12.xml")
    assert judge("nccl.torch_backend", torch=torch_cuda_host(a100), nvidia_smi=a100)["message"] == "NCCL 2.21.5 in torch 2.5.1+cu121"
    assert judge("nccl.torch_backend", torch=ok(torch_cpu()), nvidia_smi=NO_SMI)["status"] == "SKIP"
    no_nccl = torch_cuda_host(a100, nccl_available=False, nccl_version=None, distributed_available=False)
    record = judge("nccl.torch_backend", torch=no_nccl, nvidia_smi=a100)
    assert record["status"] == "FAIL" and "(torch.distributed is not available)" in record["message"]


# ---------------------------------------------------------------- end to end on this machine

def test_doctor_runs_the_stack_checks_on_this_machine():
    result = doctor.run(only=["environment", "cuda", "pytorch", "nccl", "gpu.device_properties"])
    by_id = dict((c["id"], c) for c in result["checks"])
    assert set(by_id) == {c.id for c in CATALOGUE if c.category in ("environment", "cuda", "pytorch", "nccl")} | {"gpu.device_properties"}
    assert all(c["status"] in ("PASS", "WARN", "SKIP") for c in result["checks"]), [(c["id"], c["message"]) for c in result["checks"]]
    import platform
    import sys
    assert by_id["environment.python_version"]["message"] == "Python %s (%s)" % (platform.python_version(), sys.executable)
    assert result["probes"]["torch"]["status"] == "ok"
    assert by_id["pytorch.installed"]["status"] == ("PASS" if by_id["pytorch.installed"]["details"]["version"] else "SKIP")


@pytest.mark.parametrize("check_id", ["pytorch.installed", "cuda.runtime_hint", "nccl.torch_backend"])
def test_every_status_has_a_remediation_when_not_pass(check_id):
    a100 = smi("a100-sxm4-v12.xml")
    for torch in (ok(torch_cpu()), ok(dict(torch_missing(), installed=True, import_error="ImportError: x")),
                  torch_cuda_host(a100, nccl_available=False)):
        record = judge(check_id, {"torch_required": True}, torch=torch, nvidia_smi=a100)
        assert record["status"] not in ("WARN", "FAIL") or record["remediation"], record

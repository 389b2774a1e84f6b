"""Stack probes: the torch subprocess (real interpreters, hangs, garbage) and nvcc (recorded and real)."""

import os
import shutil
import stat
import subprocess
import sys
import venv

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import run as doctor
from ansible_collections.continuum.hydra.plugins.module_utils._doctor.probes import stack
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError, run
from ansible_collections.continuum.hydra.tests.support import fabric as fabric_support
from ansible_collections.continuum.hydra.tests.support.helpers import read_fixture

CAT, SLEEP = shutil.which("cat"), shutil.which("sleep")
OPTIONS = {"timeouts": {"torch": 90, "command": 10}, "torch_python": None, "expect": {}}
TORCH_CHECKS = ["pytorch", "cuda.torch_cuda_version", "cuda.driver_cuda_compat", "cuda.runtime_hint", "nccl.torch_backend",
                "gpu.device_properties"]


def _script(path, body):
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_torch_absent_from_the_test_interpreter_is_data_not_absence():
    data = stack.probe_torch(OPTIONS)
    assert data["installed"] is False and data["import_error"] is None
    assert data["python"] == sys.executable and data["prefix"] == sys.prefix
    assert data["python_version"] == "%d.%d.%d" % sys.version_info[:3]


def test_this_interpreter_without_torch_answers_what_the_script_would_without_starting_it(monkeypatch):
    if stack.interpreter_without_torch() is None:
        pytest.skip("torch is installed for the test interpreter")
    rc, stdout, _stderr = run([sys.executable, "-c", stack.TORCH_SCRIPT], 60)
    assert rc == 0 and stack.probe_torch(OPTIONS) == stack.parse_torch_output(stdout, sys.executable)
    started = []
    monkeypatch.setattr(stack, "run", lambda *args, **kwargs: started.append(args))
    stack.probe_torch(OPTIONS)
    assert started == []  # no second interpreter on a host without torch


def test_a_torch_package_in_this_interpreter_is_probed_in_a_subprocess(tmp_path, monkeypatch):
    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('libcudart.so.12: cannot open shared object file')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert stack.interpreter_without_torch() is None
    data = stack.probe_torch(OPTIONS)  # the broken torch is imported by the script, not here
    assert data["installed"] is True and data["import_error"].startswith("ImportError: libcudart.so.12")


def test_torch_output_recorded_here_parses_and_garbage_names_its_line():
    recorded = read_fixture("hosts", "debian12-vm", "cmd", "torch-probe.json")
    one_line = " ".join(recorded.split())
    assert stack.parse_torch_output(one_line + "\n", "py")["version"] == "2.13.0+cpu"
    with pytest.raises(ProbeError, match=r"py printed unexpected output on line 1: 'Segmentation fault'"):
        stack.parse_torch_output("Segmentation fault\n" + one_line, "py")
    with pytest.raises(ProbeError, match=r"line 2: '\{\"other\": 1\}'"):
        stack.parse_torch_output(one_line + '\n{"other": 1}\n', "py")
    with pytest.raises(ProbeError, match="printed 2 JSON lines"):
        stack.parse_torch_output(one_line + "\n" + one_line, "py")
    with pytest.raises(ProbeError, match="py printed nothing"):
        stack.parse_torch_output("\n", "py")


def test_torch_python_that_prints_garbage_crashes_or_is_missing(tmp_path):
    garbage = _script(tmp_path / "garbage", "#!/bin/sh\necho hello\n")
    with pytest.raises(ProbeError, match=r"printed unexpected output on line 1: 'hello'"):
        stack.probe_torch(dict(OPTIONS, torch_python=garbage))
    crash = _script(tmp_path / "crash", "#!/bin/sh\necho 'Fatal Python error: init_fs_encoding' >&2\nexit 3\n")
    with pytest.raises(ProbeError, match="exited with rc 3: Fatal Python error: init_fs_encoding"):
        stack.probe_torch(dict(OPTIONS, torch_python=crash))
    with pytest.raises(ProbeError, match="torch_python /no/such/python is not an executable file"):
        stack.probe_torch(dict(OPTIONS, torch_python="/no/such/python"))


def test_hanging_torch_interpreter_is_an_error_of_every_torch_check(tmp_path):
    hang = _script(tmp_path / "python", "#!/bin/sh\nexec %s 600\n" % SLEEP)
    with pytest.raises(ProbeError, match="timed out after 1s"):
        stack.probe_torch(dict(OPTIONS, torch_python=hang, timeouts={"torch": 1, "command": 10}))
    result = doctor.run(only=TORCH_CHECKS, torch_python=hang, timeouts={"torch": 1})
    assert result["probes"]["torch"]["status"] == "error"
    # pytorch.installed reports the hang (ERROR); every other torch check is blocked by it, never PASS.
    assert {c["id"]: c["status"] for c in result["checks"] if c["status"] == "ERROR"} == {"pytorch.installed": "ERROR"}
    assert all(c["status"] == "SKIP" and c["blocked_by"] == "pytorch.installed"
               for c in result["checks"] if c["id"] != "pytorch.installed")
    assert all("probe torch failed" in c["message"] and "timed out after 1s" in c["message"] for c in result["checks"])


def test_a_torch_directory_in_the_working_directory_does_not_shadow(tmp_path, monkeypatch):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise RuntimeError('shadow torch imported')\n")
    monkeypatch.chdir(tmp_path)
    data = stack.probe_torch(OPTIONS)
    assert data["installed"] is False and data["import_error"] is None


def test_broken_torch_install_is_reported_as_import_error(tmp_path):
    """A torch package that raises on import (like a missing libcudart) is installed-but-broken."""
    env = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(str(env))
    site = subprocess.run([str(env / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    os.makedirs(os.path.join(site, "torch"))
    with open(os.path.join(site, "torch", "__init__.py"), "w") as handle:
        handle.write("raise OSError('libcudart.so.12: cannot open shared object file: No such file or directory')\n")
    data = stack.probe_torch(dict(OPTIONS, torch_python=str(env / "bin/python")))
    assert data["installed"] is True
    assert data["import_error"] == "OSError: libcudart.so.12: cannot open shared object file: No such file or directory"
    assert data["prefix"] == str(env)


# ---------------------------------------------------------------- a real torch (CPU wheel)

@pytest.fixture(scope="session")
def torch_venv(tmp_path_factory):
    """The session's interpreter with the real torch 2.13.0 CPU wheel (the fabric tests' venv: installed once)."""
    python = fabric_support.torch_python(tmp_path_factory)
    if python is None:
        pytest.skip("no CPU torch here: %s" % fabric_support.torch_missing_why())
    return python


@pytest.mark.integration
def test_real_cpu_torch(torch_venv):
    data = stack.probe_torch(dict(OPTIONS, torch_python=torch_venv))
    assert data["installed"] is True and data["import_error"] is None
    assert data["version"].startswith("2.13.0") and data["cuda_build"] is None
    assert data["cuda_available"] is False and data["device_count"] == 0 and data["devices"] == []
    assert data["distributed_available"] is True and data["nccl_available"] is False and data["nccl_version"] is None
    result = doctor.run(only=TORCH_CHECKS + ["environment.venv"], torch_python=torch_venv)
    status = dict((c["id"], (c["status"], c["message"])) for c in result["checks"])
    assert status["pytorch.installed"][0] == "PASS" and "torch 2.13.0" in status["pytorch.installed"][1]
    assert status["cuda.torch_cuda_version"] == ("SKIP", "torch %s is a CPU-only build (no CUDA)" % data["version"])
    assert status["nccl.torch_backend"][0] == "SKIP"
    assert status["environment.venv"] == ("PASS", "virtualenv at %s" % os.path.dirname(os.path.dirname(torch_venv)))
    if result["probes"]["nvidia_smi"]["status"] == "absent":  # this machine: no GPU, no driver
        assert status["pytorch.cuda_available"][0] == "SKIP" and status["cuda.runtime_hint"][0] == "PASS"


# ---------------------------------------------------------------- nvcc

def test_nvcc_version_recorded_here():
    recorded = read_fixture("hosts", "debian12-vm", "cmd", "nvcc--version.txt")
    assert stack.parse_nvcc_version(recorded) == {"release": "13.0", "version": "13.0.88",
                                                  "build": "cuda_13.0.r13.0/compiler.36424714_0"}
    with pytest.raises(ProbeError, match=r"no 'release X.Y, VX.Y.Z' line .*first line: \"nvcc fatal : Unknown option"):
        stack.parse_nvcc_version("nvcc fatal : Unknown option '--versio'\n")


@pytest.mark.skipif(not shutil.which("nvcc"), reason="no nvcc on this machine")
def test_nvcc_of_this_machine():
    out = subprocess.run(["nvcc", "--version"], check=True, capture_output=True, text=True).stdout
    data = stack.probe_nvcc(OPTIONS)
    assert data["path"] == shutil.which("nvcc")
    assert dict((k, data[k]) for k in ("release", "version", "build")) == stack.parse_nvcc_version(out)


def test_nvcc_absent_failing_and_in_the_toolkit_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ProbeAbsent, match=r"no CUDA toolkit: .*\(not needed for PyTorch wheels\)"):
        stack.probe_nvcc(OPTIONS, fallbacks=(str(tmp_path / "cuda/bin/nvcc"),))
    (tmp_path / "cuda/bin").mkdir(parents=True)
    recorded = read_fixture("hosts", "debian12-vm", "cmd", "nvcc--version.txt").split("# rc=")[0]
    toolkit_nvcc = _script(tmp_path / "cuda/bin/nvcc", "#!/bin/sh\n%s <<'EOF'\n%sEOF\n" % (CAT, recorded))
    assert stack.probe_nvcc(OPTIONS, fallbacks=(toolkit_nvcc,))["path"] == toolkit_nvcc
    _script(tmp_path / "nvcc", "#!/bin/sh\necho 'nvcc: error while loading shared libraries' >&2\nexit 127\n")
    with pytest.raises(ProbeError, match="--version exited with rc 127: nvcc: error while loading shared libraries"):
        stack.probe_nvcc(OPTIONS)

"""Ranks as real processes on loopback addresses (127.0.0.x, one per host): joins, verdicts, deadlines, strangers."""

import os
import socket
import subprocess
import sys
import time

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._fabric import rank as R
from ansible_collections.continuum.hydra.plugins.module_utils._fabric import wire
from ansible_collections.continuum.hydra.plugins.module_utils._status import RANK_BROKEN, RANK_NOT_JOINED, RANK_OK, RANK_PEER_LOST
from ansible_collections.continuum.hydra.tests.support import fabric as F


@pytest.fixture(scope="module")
def torch_python(tmp_path_factory):
    python = F.torch_python(tmp_path_factory)
    if python is None:
        pytest.skip("no torch for the gloo backend: %s" % F.torch_missing_why())
    return python


def test_bus_bandwidth_is_nccl_tests_definition():
    algbw, busbw = R.bus_bandwidth(8 * 10 ** 9, 2.0, 8)
    assert algbw == pytest.approx(4.0) and busbw == pytest.approx(4.0 * 2 * 7 / 8)


def test_the_group_time_is_the_slowest_rank_and_verified_needs_every_rank():
    rows = {0: [{"bytes": 1000, "seconds": 1e-3, "verified": True}], 1: [{"bytes": 1000, "seconds": 4e-3, "verified": False}]}
    (row,) = R.group_rows(rows, 2)
    assert row["time_us"] == 4000.0 and row["algbw_gbps"] == pytest.approx(2.5e-4) and row["verified"] is False


def test_four_ranks_finish_together_with_one_verdict_and_the_backend_named(tmp_path):
    procs, info = F.launch_group(4, tmp_path)
    out = F.results(procs)
    assert {out[r]["outcome"] for r in range(4)} == {RANK_OK}
    verdicts = [out[r]["verdict"] for r in range(4)]
    assert all(v == verdicts[0] for v in verdicts)
    verdict = verdicts[0]
    assert verdict["complete"] is True and verdict["backend"] == "tcp" and verdict["missing"] == verdict["lost"] == []
    assert verdict["members"] == ["h0", "h1", "h2", "h3"]
    assert [row["bytes"] for row in verdict["rows"]] == [4, 4096, 1 << 20]
    for row in verdict["rows"]:
        assert row["verified"] is True
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 * 3 / 4, rel=1e-3)
        assert row["algbw_gbps"] == pytest.approx(row["bytes"] / row["time_us"] / 1e3, rel=1e-3)
    assert out[0]["backend"] == "tcp" and out[2]["reducer"] in ("numpy", "audioop", "int")
    assert not (tmp_path / ("%s.port" % info["run_id"])).exists()  # rank 0 removed its port file


def test_a_rank_that_never_starts_is_missing_and_nobody_waits_past_the_join_deadline(tmp_path):
    began = time.monotonic()
    procs, _info = F.launch_group(4, tmp_path, skip=(2,), join_timeout=3.0)
    out = F.results(procs)
    assert time.monotonic() - began < 3.0 + 8  # the join deadline and a process start, not the run deadline (40 s)
    for r in (0, 1, 3):
        assert out[r]["outcome"] == RANK_PEER_LOST
        assert out[r]["verdict"]["missing"] == [{"rank": 2, "reason": "did not join within the join deadline (join_timeout=3s)"}]
    assert "rank 2 did not join" in out[1]["reason"]


def test_a_rank_killed_mid_collective_is_lost_and_the_others_return_promptly(tmp_path):
    procs, _info = F.launch_group(4, tmp_path, sizes=[4, 32 << 20], iterations=50, join_timeout=5.0, step_timeout=5.0,
                                  run_timeout=120.0)
    time.sleep(2.5)  # joined and into the 32 MiB sweep (50 iterations take far longer than this)
    assert procs[2].poll() is None
    killed = time.monotonic()
    procs[2].kill()
    out = F.results(procs)
    assert time.monotonic() - killed < 5.0 + R.REPORT_GRACE_S + 5  # one step timeout and the grace at most
    assert out[2] is None
    for r in (0, 1, 3):
        assert out[r]["outcome"] == RANK_PEER_LOST
        assert out[r]["verdict"]["lost"] == [{"rank": 2, "reason": "closed its connection to rank 0 (the process ended)"}]


def test_a_stranger_without_the_token_is_rejected_and_the_group_still_runs(tmp_path):
    procs, info = F.launch_group(3, tmp_path, skip=(1, 2), join_timeout=8.0)
    stranger = socket.create_connection(("127.0.0.1", info["port"]))
    channel = wire.Channel(stranger, "rank 0")
    with pytest.raises((wire.ProtocolError, wire.PeerClosed)):
        wire.answer(channel, "not-the-token-0000000000", info["run_id"], "join", 1, time.monotonic() + 5)
    for rank in (1, 2):
        options = F.rank_options(rank, 3, info["run_id"], info["token"], info["port_file"], "127.0.0.%d" % (rank + 1),
                                 "127.0.0.1", info["port"])
        procs[rank] = F.start_rank(options)
    out = F.results(procs)
    assert {out[r]["outcome"] for r in range(3)} == {RANK_OK}
    assert out[0]["verdict"]["rejected_count"] == 1
    assert "failed the join challenge" in out[0]["verdict"]["rejected"][0]


def test_rank_0_that_cannot_bind_its_address_says_so_in_the_port_file(tmp_path):
    procs, info = F.launch_group(2, tmp_path, addresses=["192.0.2.254", "127.0.0.2"])
    assert info["port_error"].startswith("cannot listen on 192.0.2.254 (any port): Cannot assign requested address")
    out = F.results(procs)
    assert out[0]["outcome"] == RANK_BROKEN and "set fabric_address" in out[0]["reason"]


def test_a_rank_that_cannot_reach_rank_0_did_not_join_by_its_own_deadline(tmp_path):
    options = F.rank_options(1, 2, "lonely", "x" * 32, None, "127.0.0.2", "127.0.0.1", 9, join_timeout=1.0)
    out = F.results({1: F.start_rank(options)})
    assert out[1]["outcome"] == RANK_NOT_JOINED
    assert out[1]["reason"].startswith("could not join rank 0 (127.0.0.1): could not connect to 127.0.0.1 port 9")


@pytest.mark.parametrize("change,message", [
    ({"world": 1}, "world: 1 is not a group size (2 or more ranks)"),
    ({"rank": 4}, "rank: 4 is not between 0 and world - 1 (3)"),
    ({"backend": "mpi"}, "backend: 'mpi' is not one of auto, tcp, gloo, nccl"),
    ({"sizes": [6]}, "sizes: [6] is not a list of byte counts, each a multiple of 4 and at least 4"),
    ({"join_timeout": 0}, "join_timeout: 0 is not a number of seconds above 0"),
    ({"run_timeout": 5}, "run_timeout: 5 must exceed join_timeout (10.0)"),
    ({"token": "short"}, "token: the run's token must have at least 16 characters"),
    ({"run_id": "../x"}, "run_id: '../x' is not 1-64 letters, digits, '.', '_' or '-'"),
    ({"port_range": "9-1"}, "port_range: '9-1' is not FIRST-LAST with 1 <= FIRST <= LAST <= 65535"),
    ({"rank": 1, "master_port": None}, "master_port: rank 1 needs rank 0's port"),
])
def test_bad_options_are_one_line_errors(change, message):
    options = F.rank_options(0, 4, "run-1", "t" * 32, "/tmp/p", "127.0.0.1", "127.0.0.1")
    options.update(change)
    with pytest.raises(R.FabricInputError) as error:
        R.validate(options)
    assert str(error.value).startswith(message)


def test_agree_picks_the_best_backend_every_rank_has_and_names_who_lacks_one():
    gpu = {"tcp": True, "gloo": True, "nccl": True}
    cpu_torch = {"tcp": True, "gloo": True, "nccl": False}
    bare = {"tcp": True, "gloo": False, "nccl": False}
    hosts = {0: "a", 1: "b", 2: "c"}
    assert R.agree("auto", {0: gpu, 1: gpu, 2: gpu}, hosts)[0] == "nccl"
    assert R.agree("auto", {0: gpu, 1: cpu_torch, 2: gpu}, hosts) == ("gloo", "every rank has torch with gloo (NCCL not on b)")
    assert R.agree("auto", {0: gpu, 1: bare, 2: cpu_torch}, hosts) == ("tcp", "no torch on b")
    assert R.agree("nccl", {0: gpu, 1: cpu_torch, 2: bare}, hosts) == (None, "backend nccl requested, not available on b, c")


def test_gloo_through_torch_when_every_rank_has_torch(tmp_path, torch_python):
    procs, _info = F.launch_group(2, tmp_path, backend="auto", torch_python=torch_python, join_timeout=90.0, run_timeout=240.0)
    out = F.results(procs, timeout=300)
    assert {out[r]["outcome"] for r in range(2)} == {RANK_OK}, out
    verdict = out[0]["verdict"]
    assert verdict["backend"] == "gloo" and verdict["backend_reason"] == "every rank has torch with gloo"
    assert all(row["verified"] for row in verdict["rows"]) and out[1]["torch_version"].startswith("2.13.0")


def _cuda_torch_python():
    """An interpreter whose torch sees at least two CUDA (or ROCm) GPUs: HYDRA_TORCH_PYTHON, else this one."""
    python = os.environ.get("HYDRA_TORCH_PYTHON") or sys.executable
    code = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    count = int(done.stdout.strip() or 0) if done.returncode == 0 else 0
    return python, count


@pytest.mark.gpu
def test_nccl_between_two_ranks_each_on_its_own_gpu(tmp_path):
    python, count = _cuda_torch_python()
    if count < 2:
        pytest.skip("NCCL needs two GPUs for two ranks on one machine (%d seen by %s)" % (count, python))
    one_gpu_each = {0: {"CUDA_VISIBLE_DEVICES": "0"}, 1: {"CUDA_VISIBLE_DEVICES": "1"}}
    procs, _info = F.launch_group(2, tmp_path, backend="auto", torch_python=python, sizes=[8, 1 << 20, 64 << 20],
                                  join_timeout=120.0, run_timeout=300.0, rank_env=one_gpu_each)
    out = F.results(procs, timeout=400)
    assert {out[r]["outcome"] for r in range(2)} == {RANK_OK}, out
    verdict = out[0]["verdict"]
    assert verdict["backend"] in ("nccl", "rccl") and verdict["backend_reason"] == "every rank has torch with NCCL and a GPU"
    assert all(row["verified"] for row in verdict["rows"]) and verdict["rows"][-1]["busbw_gbps"] > 1.0

"""Array sizing from the caches, the NumPy triad worker, and the compiled-C reference built and run for real."""

import os
import shutil

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeAbsent, ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.measure import membench

MIB = 1024 * 1024


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def test_array_size_follows_the_stream_rule():
    assert membench.choose_array_bytes(32 * MIB, 64 * 1024 * MIB) == (128 * MIB, [])
    assert membench.choose_array_bytes(None, None)[0] == 128 * MIB  # unknown LLC: 32 MiB assumed
    size, notes = membench.choose_array_bytes(1024 * MIB, 6 * 1024 * MIB)  # 4 GiB arrays would not fit
    assert size == 1024 * MIB and len(notes) == 2


def test_last_level_cache_is_summed_over_distinct_caches(tmp_path):
    for cpu_id, shared in ((0, "0-1"), (1, "0-1"), (2, "2-3"), (3, "2-3")):
        base = str(tmp_path / ("sys/devices/system/cpu/cpu%d/cache" % cpu_id))
        for index, (level, kind, size, share) in enumerate(((1, "Instruction", "32K", str(cpu_id)),
                                                            (1, "Data", "48K", str(cpu_id)),
                                                            (3, "Unified", "32768K", shared))):
            for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", share)):
                write(os.path.join(base, "index%d" % index, name), "%s\n" % value)
    assert membench.last_level_cache_bytes(str(tmp_path)) == 64 * MIB  # two L3s of 32 MiB, counted once each
    assert membench.last_level_cache_bytes(str(tmp_path / "nothing")) is None


def test_cache_sizes_in_every_unit():
    assert [membench.parse_cache_size(text) for text in ("32768K", "1M", "512", " 2G\n")] == [32 * MIB, MIB, 512, 2048 * MIB]


@pytest.mark.skipif(membench.find_compiler() is None, reason="no C compiler here")
def test_the_c_reference_compiles_and_runs_for_every_thread_count():
    reference = membench.c_triad_reference(8 * MIB, [1, 2], 120, repeats=3)
    assert reference["triad_gbps"] > 0 and reference["copy_gbps"] > 0
    expected_counts = {"1", "2"} if reference["openmp"] else {"1"}
    assert set(reference["triad_gbps_by_threads"]) == expected_counts
    assert reference["triad_gbps"] == max(reference["triad_gbps_by_threads"].values())
    assert os.path.basename(reference["compiler"]) in membench.COMPILERS


@pytest.mark.skipif(membench.find_compiler() is None, reason="no C compiler here")
def test_c_stream_measures_every_repeat_for_its_duration():
    steps = []
    found = membench.c_stream(4 * MIB, [1, 2], 0.05, 0.4, 120, progress=lambda *args: steps.append(args))
    counts = [1, 2] if found["openmp"] else [1]
    assert [step[1:3] for step in steps] == [(done, len(counts)) for done in range(len(counts))]
    assert found["method"] == "c_stream" and found["threads"] in counts
    # 0.2 s per thread count on 4 MiB arrays: far more than the 3 repeats asked for at least.
    assert len(found["rates"]["triad"]) == len(found["rates"]["copy"]) > 3
    assert found["triad_gbps"] == max(found["rates"]["triad"]) == max(found["triad_gbps_by_threads"].values())


def fake_compiler(tmp_path, program):
    """A "compiler" that writes ``program`` (shell) as the executable it is asked for."""
    source = tmp_path / "program.sh"
    source.write_text("#!/bin/sh\n" + program + "\n")
    compiler = tmp_path / "cc"
    compiler.write_text('#!/bin/sh\nwhile [ "$1" != "-o" ]; do shift; done\ncp %s "$2"\nchmod +x "$2"\n' % source)
    compiler.chmod(0o755)
    return str(compiler)


@pytest.mark.parametrize("printed, reason", [
    ('{"threads": 1, "copy_gbps_repeats": [], "triad_gbps_repeats": []}', "measured no positive rate"),
    ('{"threads": 1, "copy_gbps_repeats": [nan], "triad_gbps_repeats": [nan]}', "printed"),
    ('{"threads": 1, "copy_gbps_repeats": [-1.0], "triad_gbps_repeats": [2.0]}', "measured no positive rate"),
    ("Segmentation fault", "printed"),
])
def test_a_c_program_that_prints_no_rate_is_an_error(tmp_path, printed, reason):
    compiler = fake_compiler(tmp_path, "echo '%s'" % printed)
    with pytest.raises(ProbeError, match=reason):
        membench.c_stream(MIB, [1], 0, 0, 30, compiler=compiler)


def test_without_a_compiler_the_reference_is_absent(tmp_path):
    with pytest.raises(ProbeAbsent, match="not found"):
        membench.c_triad_reference(MIB, [1], 30, compiler=str(tmp_path / "cc"))


def test_a_compiler_that_fails_is_a_probe_error_naming_its_last_line(tmp_path):
    broken = tmp_path / "cc"
    broken.write_text("#!/bin/sh\necho 'cc: fatal error: no space left' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(ProbeError, match="cannot compile the C STREAM triad: cc: fatal error: no space left"):
        membench.c_triad_reference(MIB, [1], 30, compiler=str(broken))


def test_a_reference_that_hangs_is_killed_at_the_deadline(tmp_path):
    if shutil.which("sh") is None:
        pytest.skip("no sh")
    slow = tmp_path / "cc"
    # A "compiler" whose build sleeps: the deadline covers compiling too.
    slow.write_text("#!/bin/sh\nexec sleep 60\n")
    slow.chmod(0o755)
    with pytest.raises(ProbeError, match="timed out"):
        membench.c_triad_reference(MIB, [1], 0.5, compiler=str(slow))


def test_the_numpy_triad_worker_runs_for_real():
    pytest.importorskip("numpy")
    answer = membench.numpy_triad(4 * MIB, [1], 0.02, 0.1, 120)
    assert answer["status"] == "ok" and answer["threads"] == 1 and answer["triad_gbps"] > 0


def test_the_triad_worker_runs_with_one_blas_thread(tmp_path):
    echo = tmp_path / "python"
    echo.write_text("#!/bin/sh\nprintf '{\"status\": \"ok\", \"blas\": \"%s/%s\"}\\n' \"$OPENBLAS_NUM_THREADS\" \"$MKL_NUM_THREADS\"\n")
    echo.chmod(0o755)
    assert membench.numpy_triad(MIB, [1, 2], 0, 0, 10, python=str(echo))["blas"] == "1/1"

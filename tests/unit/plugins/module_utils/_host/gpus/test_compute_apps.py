"""nvidia-smi --query-compute-apps: the CSV lines, N/A memory, an empty listing, a failing nvidia-smi."""

import os

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeError
from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import compute_apps
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLines

# The documented CSV layout of `--query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits`:
# a process on two GPUs is two lines; [N/A] where the driver does not account the memory (containers).
LISTING = """\
41234, GPU-5d2e8c4a-6a1f-2b7c-9d3e-0f1a2b3c4d5e, 30512
41234, GPU-7f00aa11-2222-3333-4444-555566667777, 1024
50001, GPU-5d2e8c4a-6a1f-2b7c-9d3e-0f1a2b3c4d5e, [N/A]
No running processes found
"""


def test_parse_lines_memory_and_noise():
    assert compute_apps.parse_compute_apps(LISTING) == [
        {"pid": 41234, "gpu_uuid": "GPU-5d2e8c4a-6a1f-2b7c-9d3e-0f1a2b3c4d5e", "used_memory_mib": 30512},
        {"pid": 41234, "gpu_uuid": "GPU-7f00aa11-2222-3333-4444-555566667777", "used_memory_mib": 1024},
        {"pid": 50001, "gpu_uuid": "GPU-5d2e8c4a-6a1f-2b7c-9d3e-0f1a2b3c4d5e", "used_memory_mib": None},
    ]
    assert compute_apps.parse_compute_apps("") == []


def test_a_line_that_cannot_be_read_is_counted_and_the_others_kept():
    # Issue 23: a 5,000-digit pid crashed the whole listing (and the tenant probe reading it).
    bad = BadLines()
    apps = compute_apps.parse_compute_apps("9" * 5000 + LISTING[5:], bad)
    assert [app["pid"] for app in apps] == [41234, 50001] and bad.count == 1


def _fake(tmp_path, body):
    path = str(tmp_path / "nvidia-smi")
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)
    return path


def test_read_runs_the_query_and_names_a_failure(tmp_path):
    ok = _fake(tmp_path, 'test "$1" = "%s" || exit 9\necho "77, GPU-x, 5 MiB"\n' % compute_apps.QUERY)
    assert compute_apps.read_compute_apps(ok, 5) == [{"pid": 77, "gpu_uuid": "GPU-x", "used_memory_mib": 5}]
    bad = _fake(tmp_path, 'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver" >&2; exit 9\n')
    with pytest.raises(ProbeError, match="rc 9: NVIDIA-SMI has failed"):
        compute_apps.read_compute_apps(bad, 5)


def test_a_process_line_whose_pid_nvidia_smi_could_not_read_is_counted_not_dropped():
    # nvidia-smi writes a bracketed token where it cannot read a field ([N/A]; [Insufficient Permissions] for what the
    # caller may not see: an unprivileged container, another user's process). A process line without a readable pid is
    # still a process on a GPU: a bad line, counted, never "not a line" (which would make the node look idle).
    planted = LISTING.replace("50001,", "[Insufficient Permissions],").replace("41234, GPU-7f00", "[N/A], GPU-7f00")
    bad = BadLines()
    apps = compute_apps.parse_compute_apps(planted, bad)
    assert [app["pid"] for app in apps] == [41234]
    assert bad.count == 2 and bad.sample[1]["error"] == "pid '[Insufficient Permissions]' is not a process id"
    assert compute_apps.parse_compute_apps("No running processes found\n", bad) == [] and bad.count == 2


def test_a_memory_with_its_unit_is_read_and_an_unreadable_uuid_is_none():
    # Without nounits nvidia-smi writes "1024 MiB"; a field it could not read is an error string (one reader,
    # nvidia_smi.csv_fields, for every CSV query).
    apps = compute_apps.parse_compute_apps("41234, GPU-5d2e, 1024 MiB\n50001, [Unknown Error], [N/A]\n")
    assert apps == [{"pid": 41234, "gpu_uuid": "GPU-5d2e", "used_memory_mib": 1024},
                    {"pid": 50001, "gpu_uuid": None, "used_memory_mib": None}]

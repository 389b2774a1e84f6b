"""cgroup limit files read one way (the doctor's probe and cgroup remediation), on the recorded hybrid tree of
tests/fixtures/hosts and the v2 spellings."""

import pytest

from ansible_collections.continuum.hydra.plugins.module_utils._host import cgroupfs
from ansible_collections.continuum.hydra.plugins.module_utils._host.command import ProbeError
from ansible_collections.continuum.hydra.tests.support.helpers import fixture_path

CGROUP = ("hosts", "debian12-vm", "sys", "fs", "cgroup")


@pytest.mark.parametrize("path", [("memory", "memory.limit_in_bytes"), ("memory", "process_api", "memory.limit_in_bytes"),
                                  ("cpu", "cpu.cfs_quota_us")])
def test_the_recorded_v1_no_limits_read_as_none(path):
    # 9223372036854771712 (LONG_MAX rounded down to a 4 KiB page) and -1, as this machine's kernel wrote them.
    assert cgroupfs.read_limit(fixture_path(*(CGROUP + path))) is None


def test_the_recorded_v1_period_is_a_number():
    assert cgroupfs.read_limit(fixture_path(*(CGROUP + ("cpu", "cpu.cfs_period_us")))) == 100000


@pytest.mark.parametrize("text, limit", [
    ("max\n", None), ("-1\n", None), ("9223372036854771712\n", None), ("9223372036854710272\n", None),  # 64 KiB pages
    (str(2 ** 62), None), (str(2 ** 62 - 1), 2 ** 62 - 1), ("8589934592\n", 8 * 2 ** 30), ("0\n", 0),
])
def test_limit_values(text, limit):
    assert cgroupfs.parse_limit(text) == limit


def test_anything_else_is_an_error_naming_the_file(tmp_path):
    (tmp_path / "memory.max").write_text("lots\n")
    with pytest.raises(ProbeError, match=r"memory.max: 'lots' is neither 'max' nor a number"):
        cgroupfs.read_limit(str(tmp_path / "memory.max"))
    with pytest.raises(ValueError, match="'max 100000' is neither"):
        cgroupfs.parse_limit("max 100000")
    assert cgroupfs.read_limit(str(tmp_path / "memory.high")) is None  # no such file: no limit there

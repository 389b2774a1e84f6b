"""Robust statistics: the spread a group's tail implies (stats.tail_scale) against its MAD."""

import random

import pytest

from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import stats
from ansible_collections.continuum.hydra.tests.support.fleet_factory import student_t


def test_on_gaussian_values_the_tail_and_the_mad_give_the_standard_deviation():
    rng = random.Random(3)
    ordered = sorted(rng.gauss(100.0, 5.0) for _unused in range(20000))
    spread = stats.Spread(ordered)
    assert spread.scale == pytest.approx(5.0, rel=0.03)
    assert stats.tail_scale(ordered, spread.median, 0.99) == pytest.approx(5.0, rel=0.04)
    assert stats.tail_scale(ordered, spread.median, 0.99, upper=False) == pytest.approx(5.0, rel=0.04)


def test_on_heavy_tailed_values_the_tail_is_wider_than_the_mad():
    # Student-t of 3 d.o.f. with a standard deviation of 5: the MAD reads its narrow middle (3.3), the 99th
    # percentile its tail (4.541 x 5 / sqrt(3) / 2.326 = 5.6)
    rng = random.Random(3)
    ordered = sorted(100.0 + 5.0 * student_t(rng, 3) for _unused in range(20000))
    spread = stats.Spread(ordered)
    assert spread.scale == pytest.approx(3.3, rel=0.05)
    assert stats.tail_scale(ordered, spread.median, 0.99) == pytest.approx(5.6, rel=0.06)


def test_slow_values_below_the_median_leave_the_upper_tail_alone():
    ordered = sorted([100.0 + i * 0.01 for i in range(-500, 500)])
    clean = stats.tail_scale(ordered, stats.median(ordered), 0.99)
    with_faults = sorted(ordered[50:] + [50.0] * 50)   # 5 % of the group half as fast
    assert stats.tail_scale(with_faults, stats.median(with_faults), 0.99) == pytest.approx(clean, rel=0.06)


def test_a_group_too_small_for_its_tail_has_none():
    assert stats.tail_scale([float(v) for v in range(99)], 49.0, 0.99) is None
    assert stats.tail_scale([float(v) for v in range(100)], 49.5, 0.99) == pytest.approx((98.01 - 49.5) / 2.3263, rel=1e-3)
    assert stats.tail_scale([1.0] * 200, 1.0, 0.99) == 0.0

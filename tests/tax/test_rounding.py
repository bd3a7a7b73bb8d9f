"""EN 16931 rounding on minor units: the tax of a rate from the summed nets, rounded half
up once; tax-inclusive grosses split so the buyer pays exactly what was shown; totals
shared over lines by the largest remainder."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cmsshop.services.tax.rounding import net_of_gross, round_half_up, share, tax_of_nets

RATES = st.sampled_from(
    [Decimal(x) for x in ("0", "7.7", "8.1", "10", "19", "20", "21", "25.5", "27")]
)


def test_the_issues_examples():
    assert tax_of_nets([99, 99, 99], Decimal(19)) == 56  # not 3 x 19 = 57
    assert tax_of_nets([1250], Decimal(21)) == 263  # 262.5 -> 263
    assert net_of_gross(999, Decimal("25.5")) == (796, 203)


@pytest.mark.parametrize(
    ("value", "rounded"),
    [("0.5", 1), ("1.5", 2), ("2.4999", 2), ("-0.5", -1), ("-1.5", -2), ("0", 0), ("262.5", 263)],
)
def test_half_up(value, rounded):
    assert round_half_up(Decimal(value)) == rounded


@pytest.mark.parametrize(
    ("nets", "percent", "tax"),
    [
        ([1000], "19", 190),
        ([50], "21", 11),  # 10.5 -> 11: exactly half a cent goes up
        ([49], "21", 10),  # 10.29
        ([1], "25.5", 0),  # 0.255
        ([2], "25.5", 1),  # 0.51
        ([0], "19", 0),
        ([4900, 1900], "19", 1292),
        ([100], "0", 0),
        ([4900], "10", 490),  # a zero-decimal currency: 4900 yen at 10 % -> 490 yen
        ([999], "8.1", 81),  # 80.919
    ],
)
def test_tax_of_nets(nets, percent, tax):
    assert tax_of_nets(nets, Decimal(percent)) == tax


def test_an_inclusive_gross_with_no_exact_net_keeps_the_gross():
    """1.01 at 25.5 %: 80 + 20 = 100 and 81 + 21 = 102, no net makes 101; the gross the
    buyer saw wins and the tax is the rest (a cent off net x rate)."""
    net, tax = net_of_gross(101, Decimal("25.5"))
    assert net + tax == 101 and (net, tax) == (80, 21)
    assert round_half_up(Decimal(net) * Decimal("0.255")) == 20


@given(st.integers(min_value=0, max_value=10**10), RATES)
def test_inclusive_always_adds_up_and_is_within_a_cent(gross, percent):
    net, tax = net_of_gross(gross, percent)
    assert net + tax == gross and net >= 0 and tax >= 0
    assert abs(tax - round_half_up(Decimal(net) * percent / 100)) <= 1


@given(st.lists(st.integers(min_value=0, max_value=10**8), min_size=1, max_size=10), RATES)
def test_exclusive_tax_is_the_rounded_sum(nets, percent):
    assert tax_of_nets(nets, percent) == round_half_up(Decimal(sum(nets)) * percent / 100)


@given(
    st.integers(min_value=-(10**9), max_value=10**9),
    st.lists(st.integers(min_value=0, max_value=10**7), min_size=1, max_size=8),
)
def test_share_adds_up_exactly(total, weights):
    parts = share(total, weights)
    assert sum(parts) == total and len(parts) == len(weights)
    if sum(weights) and 0 <= total <= sum(weights):
        assert all(0 <= p <= w for p, w in zip(parts, weights, strict=True))


def test_share_in_proportion_with_ties_to_the_first():
    assert share(100, [1, 1, 1]) == [34, 33, 33]
    assert share(56, [99, 99, 99]) == [19, 19, 18]
    assert share(-10, [1, 1]) == [-5, -5]
    assert share(7, [0, 0]) == [7, 0]
    assert share(5, []) == []

"""Tax arithmetic as the EU e-invoicing norm (EN 16931) does it, in Decimal, on integer
minor units (cents; yen for a zero-decimal currency: the rule is the same).

- Prices without tax (exclusive): the tax of a rate is the sum of that rate's line nets
  times the rate, rounded half up once -- not a sum of rounded line taxes. 3 x 0.99 at
  19 %: 2.97 x 0.19 = 0.5643 -> 0.56 (per-line rounding would give 3 x 0.19 = 0.57).
- Prices with tax (inclusive): the buyer pays exactly the gross shown. The net of a
  rate's gross G is G / (1 + r) rounded half up, the tax G - net: 9.99 at 25.5 % ->
  net 7.96, tax 2.03. That tax equals net x r rounded (the EN 16931 check) for almost
  every G; where it cannot (no whole-cent net n has n + round(n x r) == G, e.g. 1.01 at
  25.5 %) the gross shown wins and the tax is G - net, one cent off net x r at most.
  ``net_of_gross`` prefers a net that passes the check when one exists.
- Each line still shows its own net and tax: a rate's totals are shared out over its
  lines in proportion to their amounts by the largest remainder, so the lines add up to
  the totals exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal

ONE = Decimal(1)


def round_half_up(value: Decimal) -> int:
    """A Decimal amount of minor units to a whole one, half up (0.5 -> 1, -0.5 -> -1)."""
    return int(value.quantize(ONE, rounding=ROUND_HALF_UP))


def fraction(percent: Decimal) -> Decimal:
    """``Decimal("25.5")`` percent -> ``Decimal("0.255")``."""
    return percent / 100


def tax_of_nets(nets: Sequence[int], percent: Decimal) -> int:
    """The tax of one rate's lines: their summed nets times the rate, rounded once."""
    return round_half_up(Decimal(sum(nets)) * fraction(percent))


def net_of_gross(gross: int, percent: Decimal) -> tuple[int, int]:
    """(net, tax) of a tax-inclusive gross at ``percent``, net + tax == gross."""
    rate = fraction(percent)
    net = round_half_up(Decimal(gross) / (ONE + rate))
    for candidate in (net, net - 1, net + 1):
        if candidate >= 0 and candidate + round_half_up(Decimal(candidate) * rate) == gross:
            return candidate, gross - candidate
    return net, gross - net


def share(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` shared out in proportion to ``weights`` by the largest remainder: the
    parts add up to ``total`` exactly (ties go to the earlier weight). All weights 0:
    the whole total on the first part (a rate group of free lines has no tax anyway)."""
    if not weights:
        return []
    whole = sum(weights)
    if whole == 0:
        return [total] + [0] * (len(weights) - 1)
    sign = -1 if total < 0 else 1
    magnitude = abs(total)
    parts = [magnitude * w // whole for w in weights]
    order = sorted(range(len(weights)), key=lambda i: (-(magnitude * weights[i] % whole), i))
    for i in order[: magnitude - sum(parts)]:
        parts[i] += 1
    return [sign * part for part in parts]

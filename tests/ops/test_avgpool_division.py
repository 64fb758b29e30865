"""The average pool's division as the kernel does it (compiler/ops/avgpool.py: division): for
every divisor a window can have, the proven multiply-shift equals the exact rational rounding
on every sum the input type allows, checked here by brute force against
rounding.div_round (not the prover's thresholds); where no single multiply-shift exists
(truncation of signed sums, ties rounded to even) the kernel divides, and says so."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.compiler.ir.types import FixedType
from tessera.compiler.ops import avgpool, quant
from tessera.compiler.exact.rounding import div_round


def brute_force(attrs, x, table):
    q = attrs.out
    up, down = avgpool.divisor_shifts(q, x)
    k = int(np.prod(attrs.kernel))
    sums = np.arange(min(k * x.lo, 0), max(k * x.hi, 0) + 1, dtype=np.int64)
    for n, ms in table.items():
        want = np.clip(div_round(sums << np.int64(up), np.int64(n << down), q.rounding), q.qmin, q.qmax)
        got = np.clip((sums.astype(object) * ms.mult + ms.add) >> ms.shift, q.qmin, q.qmax).astype(np.int64)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (n, int(sums[bad[0]]), int(got[bad[0]]), int(want[bad[0]]))


CASES = [  # (count_include_pad, rounding): CosmoFlow's pool is the first (divisor 27 only)
    (True, "ROUND"), (True, "HALF_UP"), (True, "HALF_DOWN"), (True, "FLOOR"), (True, "CEIL"),
    (False, "FLOOR"), (False, "CEIL"),  # divisors 8 .. 27
]


@pytest.mark.parametrize("include_pad,rounding", CASES)
@pytest.mark.parametrize("in_frac,out_frac,signed", [(7, 7, True), (7, 8, True), (6, 6, False), (3, 5, True)])
def test_multiply_shift_equals_the_exact_average_on_every_sum(make_type, include_pad, rounding, in_frac, out_frac,
                                                              signed):
    x = make_type(8, in_frac, signed, (2, 5, 6, 7))
    q = quant.Attrs(FixedType(8, out_frac, True), False, rounding)
    attrs = avgpool.Attrs((3, 3, 3), (2, 2, 2), (1,) * 6, include_pad, q)
    table = avgpool.division(attrs, x)
    assert table is not None
    assert set(table) == {int(n) for n in np.unique(avgpool.divisors(attrs, x.shape[1:]))}
    assert len({m.shift for m in table.values()}) == 1
    brute_force(attrs, x, table)
    assert avgpool.OP.form(attrs, [x], None).startswith("multiply-shift")


def test_truncating_a_signed_average_falls_back_to_division(make_type):
    """trunc(S / n) has a step twice as wide at zero: no single floor((m S + a) >> s) is it."""
    x = make_type(8, 7, True, (2, 5, 6, 7))
    attrs = avgpool.Attrs((3, 3, 3), (2, 2, 2), (1,) * 6, True, quant.Attrs(FixedType(8, 7, True), False, "DOWN"))
    assert avgpool.division(attrs, x) is None
    assert avgpool.OP.form(attrs, [x], None).startswith("integer division")
    unsigned = make_type(8, 7, False, (2, 5, 6, 7))  # sums >= 0: truncation is floor
    brute_force(attrs, unsigned, avgpool.division(attrs, unsigned))

"""Input codes for verification: extremes first, then random codes over the whole type range."""

from __future__ import annotations

import numpy as np

from .ir.types import TensorType


def sample_codes(t: TensorType, n: int, seed: int = 0) -> np.ndarray:
    """``n`` samples of int64 codes for a tensor of type ``t``.

    The first samples are all-minimum, all-maximum, all-zero and a min/max checkerboard;
    a quarter of the rest draw each element from {min, 0, max}; the others are uniform
    over every code the input type allows.
    """
    rng = np.random.default_rng(seed)
    shape = (n, *t.shape)
    out = rng.integers(t.lo, t.hi, size=shape, endpoint=True, dtype=np.int64)
    fixed = [np.full(t.shape, t.lo), np.full(t.shape, t.hi), np.zeros(t.shape, dtype=np.int64),
             np.where(np.indices(t.shape).sum(axis=0) % 2 == 0, t.lo, t.hi)]
    for i, pattern in enumerate(fixed[:n]):
        out[i] = pattern
    k = len(fixed)
    n_ext = max(0, (n - k) // 4)
    if n_ext:
        choices = np.array([t.lo, 0, t.hi], dtype=np.int64)
        out[k : k + n_ext] = choices[rng.integers(0, 3, size=(n_ext, *t.shape))]
    return out

"""Inputs: codes for verification (extremes first, then random codes over the whole type range),
and the arrays users give in ``.npy`` files."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import InputDataError, first_line
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


def read_array(path: str | Path, what: str = "input array") -> np.ndarray:
    """The array of a ``.npy`` file (no pickles), or one line naming the file."""
    try:
        x = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise InputDataError(f"cannot read {what} {path}: {first_line(exc)}") from None
    if not isinstance(x, np.ndarray):  # an .npz archive
        raise InputDataError(f"cannot read {what} {path}: not a .npy array")
    if not np.issubdtype(x.dtype, np.number):
        raise InputDataError(f"{what} {path} holds {x.dtype} values, not numbers")
    return x

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


def input_samples(graph, n: int, seed: int = 0) -> np.ndarray:
    """``n`` samples of a design's input codes (:func:`sample_codes` per input port, packed)."""
    from .ir.graph import pack

    return pack([sample_codes(graph.values[v], n, seed + i) for i, v in enumerate(graph.inputs)])


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


def read_inputs(source, names: list[str], what: str = "input") -> tuple[list[np.ndarray], str]:
    """Arrays for the inputs ``names`` (the model's, in order) from ``source``: one array or
    ``.npy`` (one input); a list of them, one per input in the model's order; a dict by the
    model's input names; or an ``.npz`` archive of arrays keyed by those names.  Also says
    where they came from; one line when they do not match the inputs."""
    label = what
    if isinstance(source, (str, Path)) and str(source).endswith(".npz"):
        label = f"{what} {source}"
        try:
            with np.load(source, allow_pickle=False) as archive:
                source = {k: archive[k] for k in archive.files}
        except (OSError, ValueError, EOFError) as exc:
            raise InputDataError(f"cannot read {what} {source}: {first_line(exc)}") from None
    if isinstance(source, dict):
        unknown, missing = sorted(set(source) - set(names)), [n for n in names if n not in source]
        if unknown or missing:
            raise InputDataError(f"{what}: arrays named {', '.join(unknown) or '(none)'} given, the model's inputs are "
                                 f"{', '.join(names)}" + (f" (missing {', '.join(missing)})" if missing else ""))
        arrays = [np.asarray(source[n]) for n in names]
        for a, n in zip(arrays, names):
            _require_samples(a, f"{label} ({n})")
        return arrays, what
    items = list(source) if isinstance(source, (list, tuple)) else [source]
    if len(items) != len(names):
        raise InputDataError(f"{what}: {len(items)} arrays for the model's {len(names)} inputs ({', '.join(names)})")
    arrays = [a if isinstance(a, np.ndarray) else read_array(a, f"{what} ({n})" if len(names) > 1 else what)
              for a, n in zip(items, names)]
    for a, item, n in zip(arrays, items, names):
        _require_samples(a, f"{what}{f' ({n})' if len(names) > 1 else ''}"
                            f"{'' if isinstance(item, np.ndarray) else f' {item}'}")
    where = ", ".join(str(a) for a in items if not isinstance(a, np.ndarray)) or what
    return arrays, where


def _require_samples(array: np.ndarray, what: str) -> None:
    """One line when ``array`` holds no sample (no element at all, e.g. shape (0, 6))."""
    if np.size(array) == 0:
        raise InputDataError(f"{what} holds no sample (an array of shape {tuple(np.shape(array))}); give at least one")

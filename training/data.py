"""Hybrid-parallel I/O: every rank reads only its own hyperslab of each sample.

Paper 1's I/O for spatially parallel training: a sample file is never read whole by any
rank; rank ``s`` of a spatial group reads the block ``s`` of the volume (the blocks of
:func:`tessera.compiler.partition.regions.grid_blocks`), optionally widened by a halo, with an
HDF5 hyperslab selection (h5py), and the data-parallel replicas read disjoint samples.

:class:`ShardReader` opens each file through a byte-counting file object (h5py's
``fileobj`` driver) so that what a rank really read is measured: ``data_bytes`` counts
bytes read inside the volume dataset's extent on disk, ``meta_bytes`` everything else
(superblock, object headers, the small target dataset).  Measured: ``data_bytes`` equals the
hyperslab's size exactly (tests/training/test_io.py).

A sample that cannot be used -- missing, truncated or not HDF5, without the volume or target
dataset, of another shape than the run's, or with non-finite values in what the rank read --
raises :class:`SampleError` naming the file and the sample index (a one-line CLI error, exit
code 9).  Bad samples are never skipped silently: a skipped sample would change the
mini-batches and the trajectory without a trace (docs/training.md).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..compiler.errors import DataError
from ..compiler.partition.regions import Span
from ..models.data.cosmology import TARGET_KEY, VOLUME_KEY

__all__ = ["ReadStats", "SampleError", "ShardReader", "hyperslab_bytes", "sample_error"]


class SampleError(DataError):
    """A sample file cannot be used for training (exit code 9): the message names the file
    and the sample index."""


def sample_error(path, index: int | None, what: str) -> SampleError:
    """``SampleError('sample 3 (data/univ_000003.h5): <what>')``."""
    where = f"sample {index} ({path})" if index is not None else str(path)
    return SampleError(f"{where}: {what}")


def _describe(exc: BaseException) -> str:
    """One line; no square brackets (the CLI prints messages as rich markup)."""
    return " ".join(str(exc).split()).replace("[", "(").replace("]", ")") or type(exc).__name__


class _CountingFile(io.RawIOBase):
    """A read-only file that records the byte ranges it served."""

    def __init__(self, path: Path):
        self._f = open(path, "rb")
        self.reads: list[tuple[int, int]] = []

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset, whence=io.SEEK_SET):
        return self._f.seek(offset, whence)

    def tell(self):
        return self._f.tell()

    def readinto(self, b) -> int:
        pos = self._f.tell()
        n = self._f.readinto(b)
        if n:
            self.reads.append((pos, pos + n))
        return n

    def close(self):
        self._f.close()
        super().close()


@dataclass
class ReadStats:
    """Bytes one reader took from disk: inside the volume dataset, and all the rest."""

    data_bytes: int = 0
    meta_bytes: int = 0
    files: int = 0
    per_file: list[int] = field(default_factory=list)


def hyperslab_bytes(span: Span, channels: int, itemsize: int) -> int:
    """Bytes of a ``(dz, dy, dx, C)`` selection."""
    return int(np.prod([b - a for a, b in span])) * channels * itemsize


class ShardReader:
    """Reads this rank's block (``span``: global ``(z, y, x)`` half-open ranges, clipped to
    the volume) of sample files in the CosmoFlow layout; returns ``log1p`` counts channels
    first, float32."""

    def __init__(self, span: Span, volume_key: str = VOLUME_KEY, target_key: str = TARGET_KEY,
                 shape: tuple[int, ...] | None = None, target_shape: tuple[int, ...] | None = None):
        self.span = tuple((int(a), int(b)) for a, b in span)
        self.volume_key, self.target_key = volume_key, target_key
        self.shape = None if shape is None else tuple(int(n) for n in shape)
        self.target_shape = None if target_shape is None else tuple(int(n) for n in target_shape)
        self.stats = ReadStats()

    def read(self, path: str | Path, index: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """This reader's block of sample ``path`` (``index``: its number, for error messages)
        and its targets.  Raises :class:`SampleError` for a file that cannot be used."""
        import h5py

        path = Path(path)
        try:
            f = _CountingFile(path)
        except OSError as exc:
            raise sample_error(path, index, f"cannot open: {exc.strerror or _describe(exc)}") from None
        try:
            with h5py.File(f, "r", driver="fileobj", rdcc_nbytes=0) as h5:
                ds, t = self._dataset(h5, self.volume_key, path, index), self._dataset(h5, self.target_key, path, index)
                if ds.chunks is not None:
                    raise sample_error(path, index, "chunked volume datasets are not supported (contiguous expected)")
                if ds.ndim != 4 or (self.shape is not None and tuple(ds.shape) != self.shape):
                    want = self.shape if self.shape is not None else "(D, H, W, C)"
                    raise sample_error(path, index, f"volume {self.volume_key!r} has shape {tuple(ds.shape)}, "
                                                    f"expected {want}")
                if self.target_shape is not None and tuple(t.shape) != self.target_shape:
                    raise sample_error(path, index, f"target {self.target_key!r} has shape {tuple(t.shape)}, "
                                                    f"expected {self.target_shape}")
                shape = ds.shape[:3]
                lo_hi = [(max(0, a), min(n, b)) for (a, b), n in zip(self.span, shape)]
                if any(a >= b for a, b in lo_hi):
                    raise sample_error(path, index, f"block {self.span} outside the volume {shape}")
                sl = tuple(slice(a, b) for a, b in lo_hi)
                vol = ds[sl + (slice(None),)]
                y = np.asarray(t[...], dtype=np.float32)
                start, size = ds.id.get_offset(), ds.id.get_storage_size()
        except SampleError:
            raise
        except Exception as exc:  # h5py / HDF5 failing to parse the file: the file's fault, not ours
            raise sample_error(path, index, f"not a readable HDF5 sample (corrupt or truncated?): {_describe(exc)}") \
                from None
        finally:
            f.close()
        data = sum(max(0, min(b, start + size) - max(a, start)) for a, b in f.reads)
        total = sum(b - a for a, b in f.reads)
        self.stats.data_bytes += data
        self.stats.meta_bytes += total - data
        self.stats.files += 1
        self.stats.per_file.append(data)
        with np.errstate(invalid="ignore", divide="ignore"):  # counts < -1: reported below
            x = np.log1p(np.asarray(vol, dtype=np.float32))
        bad = int(x.size - np.count_nonzero(np.isfinite(x)))
        if bad:
            raise sample_error(path, index, f"{bad} non-finite values (NaN, inf or counts < -1) in the block "
                                            f"{self.span} of {self.volume_key!r}")
        if not np.isfinite(y).all():
            raise sample_error(path, index, f"non-finite target {tuple(y.tolist())}")
        return np.ascontiguousarray(np.moveaxis(x, -1, 0)), y

    @staticmethod
    def _dataset(h5, key: str, path: Path, index: int | None):
        import h5py

        if key not in h5:
            try:
                holds = ", ".join(sorted(str(k) for k in h5.keys())) or "nothing"
            except Exception:  # a damaged group: say what is missing all the same
                holds = "unreadable"
            raise sample_error(path, index, f"no dataset {key!r} (holds: {holds})")
        obj = h5[key]
        if not isinstance(obj, h5py.Dataset):
            raise sample_error(path, index, f"{key!r} is not a dataset")
        return obj

    def read_many(self, paths: Sequence[str | Path], indices: Sequence[int] | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
        indices = [None] * len(paths) if indices is None else indices
        xs, ys = zip(*(self.read(p, i) for p, i in zip(paths, indices)))
        return np.stack(xs), np.stack(ys)

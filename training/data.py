"""Hybrid-parallel I/O: every rank reads only its own hyperslab of each sample.

Paper 1's I/O for spatially parallel training: a sample file is never read whole by any
rank; rank ``s`` of a spatial group reads the block ``s`` of the volume (the blocks of
:func:`tessera.compiler.partition.plan.grid_blocks`), optionally widened by a halo, with an
HDF5 hyperslab selection (h5py), and the data-parallel replicas read disjoint samples.

:class:`ShardReader` opens each file through a byte-counting file object (h5py's
``fileobj`` driver) so that what a rank really read is measured: ``data_bytes`` counts
bytes read inside the volume dataset's extent on disk, ``meta_bytes`` everything else
(superblock, object headers, the small target dataset).  Measured: ``data_bytes`` equals the
hyperslab's size exactly (tests/training/test_io.py).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..compiler.partition.regions import Span
from ..models.data.cosmology import TARGET_KEY, VOLUME_KEY

__all__ = ["ReadStats", "ShardReader", "hyperslab_bytes"]


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

    def __init__(self, span: Span, volume_key: str = VOLUME_KEY, target_key: str = TARGET_KEY):
        self.span = tuple((int(a), int(b)) for a, b in span)
        self.volume_key, self.target_key = volume_key, target_key
        self.stats = ReadStats()

    def read(self, path: str | Path) -> tuple[np.ndarray, np.ndarray]:
        import h5py

        f = _CountingFile(Path(path))
        try:
            with h5py.File(f, "r", driver="fileobj", rdcc_nbytes=0) as h5:
                ds = h5[self.volume_key]
                if ds.chunks is not None:
                    raise ValueError(f"{path}: chunked volume datasets are not supported (contiguous expected)")
                shape = ds.shape[:3]
                lo_hi = [(max(0, a), min(n, b)) for (a, b), n in zip(self.span, shape)]
                if any(a >= b for a, b in lo_hi):
                    raise ValueError(f"{path}: block {self.span} outside the volume {shape}")
                sl = tuple(slice(a, b) for a, b in lo_hi)
                vol = ds[sl + (slice(None),)]
                start, size = ds.id.get_offset(), ds.id.get_storage_size()
                y = np.asarray(h5[self.target_key][...], dtype=np.float32)
        finally:
            f.close()
        data = sum(max(0, min(b, start + size) - max(a, start)) for a, b in f.reads)
        total = sum(b - a for a, b in f.reads)
        self.stats.data_bytes += data
        self.stats.meta_bytes += total - data
        self.stats.files += 1
        self.stats.per_file.append(data)
        x = np.log1p(np.asarray(vol, dtype=np.float32))
        return np.ascontiguousarray(np.moveaxis(x, -1, 0)), y

    def read_many(self, paths: Sequence[str | Path]) -> tuple[np.ndarray, np.ndarray]:
        xs, ys = zip(*(self.read(p) for p in paths))
        return np.stack(xs), np.stack(ys)

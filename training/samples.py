"""The training data as each rank reads it: its hyperslab of every CosmoFlow HDF5 sample (exact
box symmetries drawn alike on every rank, read as at most two boxes per axis), or its block
of the MNI152 patches; the targets every rank needs for the replicated tail; and crops of a
sample folder into smaller volumes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from ..models.data.cosmology import TARGET_KEY
from .data import SampleError, ShardReader, sample_error
from .mesh import MeshError

__all__ = ["BrainData", "CosmoData", "Samples", "augment_index", "folder_manifest", "read_sample_target",
           "read_sample_target_path", "write_crops"]


def augment_index(size: int, rng: np.random.Generator, shifts: bool = True
                  ) -> tuple[tuple[int, ...], tuple[bool, ...], tuple[int, ...]]:
    """One exact box symmetry (axis permutation, flips, periodic shifts if ``shifts``), as
    :func:`tessera.models.data.cosmology.augment` draws it."""
    perm = tuple(int(p) for p in rng.permutation(3))
    flips = tuple(bool(rng.random() < 0.5) for _ in range(3))
    shift = tuple(int(s) for s in rng.integers(0, size, size=3))
    return perm, flips, shift if shifts else (0, 0, 0)


def _source_indices(block: tuple[tuple[int, int], ...], size: int, sym) -> list[np.ndarray]:
    """For output axis j of the augmented volume: the source index (on original axis
    ``perm[j]``) of every output row of this rank's block."""
    perm, flips, shifts = sym
    out = []
    for j, (a, b) in enumerate(block):
        t = (np.arange(a, b) - shifts[j]) % size
        out.append(size - 1 - t if flips[j] else t)
    return out


class Samples:
    """This rank's view of the CosmoFlow files: its hyperslab of any sample, augmented."""

    def __init__(self, folder: Path, n: int, block, size: int, val_fraction: float = 0.2,
                 samples_per_cosmology: int = 1, channels: int = 4, n_targets: int = 4):
        self.paths = [folder / f"univ_{i:06d}.h5" for i in range(n)]
        n_cosmo = -(-n // samples_per_cosmology)
        n_val = max(1, int(round(n_cosmo * val_fraction)))
        cosmo = np.arange(n) // samples_per_cosmology
        self.train = np.flatnonzero(cosmo < n_cosmo - n_val)
        self.val = np.flatnonzero(cosmo >= n_cosmo - n_val)
        self.block, self.size = block, size
        self.reader = ShardReader(block, shape=(size, size, size, channels), target_shape=(n_targets,))

    def read(self, idx, sym_of=None) -> tuple[np.ndarray, np.ndarray]:
        if sym_of is None:
            return self.reader.read_many([self.paths[i] for i in idx], [int(i) for i in idx])
        xs, ys = [], []
        for i in idx:
            x, y = self._read_augmented(self.paths[i], sym_of(i), int(i))
            xs.append(x)
            ys.append(y)
        return np.stack(xs), np.stack(ys)

    def _read_augmented(self, path, sym, index: int | None = None):
        """The rank's block of the augmented sample: the source rows along each original
        axis form at most two runs (periodic wrap); read those boxes only."""
        perm = sym[0]
        src = _source_indices(self.block, self.size, sym)  # per output axis
        need = [None] * 3
        for j in range(3):
            need[perm[j]] = np.unique(src[j])
        runs = []
        for u in need:
            cut = np.flatnonzero(np.diff(u) != 1) + 1
            runs.append([(int(r[0]), int(r[-1]) + 1) for r in np.split(u, cut)])
        buf = None
        y = None
        for r0 in runs[0]:
            for r1 in runs[1]:
                for r2 in runs[2]:
                    box = (r0, r1, r2)
                    self.reader.span = box
                    x, y = self.reader.read(path, index)
                    if buf is None:
                        buf = np.zeros((x.shape[0], *[len(u) for u in need]), dtype=np.float32)
                    pos = [np.searchsorted(need[k], np.arange(*box[k])) for k in range(3)]
                    buf[(slice(None),) + np.ix_(*pos)] = x
        self.reader.span = self.block
        # original axes -> output axes, then pick each output row
        v = np.transpose(buf, (0, *(1 + np.asarray(perm))))
        idx = [np.searchsorted(need[perm[j]], src[j]) for j in range(3)]
        return np.ascontiguousarray(v[(slice(None),) + np.ix_(*idx)]), y


class CosmoData:
    """CosmoFlow: per-rank hyperslabs of the HDF5 samples; the tail's loss needs the targets
    of the whole mini-batch (16 bytes a sample)."""

    kind = "regression"

    def __init__(self, samples: Samples, sym):
        self.samples, self.sym = samples, sym
        self.train, self.val = samples.train, samples.val

    def batch(self, glob, part: slice, epoch: int | None):
        """This rank's inputs (its samples ``glob[part]``, its block) and the loss targets."""
        sym_of = None if epoch is None or self.sym is None else (lambda i: self.sym(epoch, i))
        x, _ = self.samples.read(glob[part], sym_of)
        y = np.stack([read_sample_target(self.samples, i) for i in glob])
        return torch.from_numpy(x), torch.from_numpy(y)

    def count(self, glob) -> int:
        return len(glob) * 4


#: y extent of the MNI152 template at 2 mm (98 x 116 x 94 voxels; 197 x 233 x 189 at 1 mm)
_BRAIN_Y_2MM = 116


def brain_resolution(patch: int, val_fraction: float = 0.3) -> int:
    """Template resolution (mm) the U-Net's patches are cut from: 2 mm while a patch fits
    the validation slab (the low-y ``val_fraction`` of the template, 35 voxels at 2 mm),
    1 mm for larger patches (70 voxels: up to 64^3 and beyond)."""
    return 2 if patch <= round(_BRAIN_Y_2MM * val_fraction) else 1


class BrainData:
    """U-Net: the MNI152 patches of :func:`tessera.models.data.brain.load_brain_patches`
    (one small template, loaded by every rank), each rank keeping its block of its samples'
    patches and labels; the epoch's flips and intensity jitter are drawn alike on all ranks."""

    kind = "segmentation"

    def __init__(self, n_samples: int, size: int, seed: int, data_seed: int, in_block, out_block):
        from ..models.data.brain import load_brain_patches

        self.resolution = brain_resolution(size)
        b = load_brain_patches(n_train=n_samples, n_val=max(8, n_samples // 4), patch=size, seed=data_seed,
                               resolution=self.resolution)
        self.x = np.concatenate([b.x_train, b.x_val])
        self.y = np.concatenate([b.y_train, b.y_val]).astype(np.int64)
        self.train = np.arange(len(b.x_train))
        self.val = np.arange(len(b.x_train), len(self.x))
        self.seed = seed
        self.ib = tuple(slice(a, c) for a, c in in_block)
        self.ob = tuple(slice(a, c) for a, c in out_block)

    def batch(self, glob, part: slice, epoch: int | None):
        """This rank's block of its samples ``glob[part]`` and of their labels."""
        x, y = self.x[glob[part]], self.y[glob[part]]
        if epoch is not None:
            from ..models.data.brain import augment

            rng = np.random.default_rng([self.seed, epoch, int(glob[0])])
            x, y = augment(self.x[glob], self.y[glob], rng)  # drawn over the whole mini-batch
            x, y = x[part], y[part]
        x = np.ascontiguousarray(x[(slice(None), slice(None)) + self.ib])
        y = np.ascontiguousarray(y[(slice(None),) + self.ob])
        return torch.from_numpy(x), torch.from_numpy(y)

    def count(self, glob) -> int:
        return len(glob) * int(np.prod(self.y.shape[1:]))


def folder_manifest(folder) -> dict:
    """``config`` of a sample folder's ``manifest.json`` (``{}`` without one)."""
    if folder is None or not (Path(folder) / "manifest.json").is_file():
        return {}
    return dict(json.loads((Path(folder) / "manifest.json").read_text())["config"])


def write_crops(src: Path, dst: Path, crop: int) -> Path:
    """Cut every ``S^3`` sample of ``src`` into its ``(S / crop)^3`` non-overlapping
    ``crop^3`` sub-volumes (read as hyperslabs), written to ``dst`` in the same layout with
    ``samples_per_cosmology = (S / crop)^3`` (so the validation split keeps a universe's crops
    together) and ``periodic = False``."""
    from ..models.data.cosmology import read_hyperslab, write_sample

    cfg = folder_manifest(src)
    size, n = int(cfg["size"]), int(cfg["n_samples"])
    if size % crop:
        raise MeshError(f"crop {crop} does not divide the volume {size}")
    k = size // crop
    per = k ** 3
    if cfg.get("samples_per_cosmology", 1) != 1:
        raise MeshError("crops of folders with several realizations per cosmology are not supported")
    want = {**cfg, "size": crop, "n_samples": n * per, "samples_per_cosmology": per, "periodic": False,
            "cropped_from": str(src)}
    mf = dst / "manifest.json"
    if mf.is_file() and json.loads(mf.read_text())["config"] == want:
        return dst
    dst.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        y = read_sample_target_path(src / f"univ_{i:06d}.h5")
        for c, (a, b, cc) in enumerate(np.ndindex(k, k, k)):
            vol = read_hyperslab(src / f"univ_{i:06d}.h5", (a * crop, b * crop, cc * crop), (crop,) * 3)
            write_sample(dst / f"univ_{i * per + c:06d}.h5", vol, y)
    mf.write_text(json.dumps({"config": want}, indent=2) + "\n")
    return dst


def read_sample_target_path(path: Path, key: str = TARGET_KEY, index: int | None = None,
                            shape: tuple[int, ...] | None = None) -> np.ndarray:
    """The targets of one sample file (:class:`~tessera.training.data.SampleError` naming the
    file and ``index`` if they cannot be read, have another ``shape`` or are not finite)."""
    import h5py

    try:
        with h5py.File(path, "r") as f:
            if key not in f:
                raise sample_error(path, index, f"no dataset {key!r} (holds: {', '.join(sorted(f.keys())) or 'nothing'})")
            y = np.asarray(f[key][...], dtype=np.float32)
    except SampleError:
        raise
    except Exception as exc:  # h5py / HDF5 failing to parse the file: the file's fault
        raise sample_error(path, index, f"cannot read the target {key!r} (missing, corrupt or truncated file?): "
                                        f"{' '.join(str(exc).split()) or type(exc).__name__}") from None
    if shape is not None and y.shape != tuple(shape):
        raise sample_error(path, index, f"target {key!r} has shape {y.shape}, expected {tuple(shape)}")
    if not np.isfinite(y).all():
        raise sample_error(path, index, f"non-finite target {tuple(y.tolist())}")
    return y


def read_sample_target(samples: Samples, i: int) -> np.ndarray:
    """The target of sample ``i`` (a few bytes; every rank needs the mini-batch's targets
    for the replicated tail)."""
    return read_sample_target_path(samples.paths[i], samples.reader.target_key, int(i), samples.reader.target_shape)

"""Brain tissue segmentation patches from the real MNI152 2009 template (nilearn's copy).

Source: the ``nilearn==0.14.1`` wheel on PyPI ships the ICBM 2009a symmetric MNI152
template at 1 mm (197 x 233 x 189 voxels, uint8), as three NIfTI-1 files:

* ``nilearn/datasets/data/mni_icbm152_t1_tal_nlin_sym_09a_converted.nii.gz`` (T1),
* ``..._gm_...`` and ``..._wm_...`` (grey / white matter probability maps).

(Only the 1 mm version is in the wheel; :func:`load_mni152` makes the 2 mm one by 2x2x2
block averaging.)  The files are fetched once with
:func:`tessera.models.data.cache.fetch_pypi_file` (nilearn itself is not installed) and
read by :func:`read_nifti`, a small NIfTI-1 reader (348-byte header + raw data, gzip).

Segmentation set: 3 classes, background (0) / grey matter (1) / white matter (2):
a voxel is GM or WM by the argmax of the two probability maps where that maximum is at
least :data:`PROB_THRESHOLD`, background otherwise.  Input: the T1 intensity divided by
its 99th percentile inside the head.  Cubic patches (default 32^3 at 2 mm) are drawn
seeded; **train and validation patches come from spatially disjoint slabs** along the
anterior-posterior axis (validation: the low-y ``val_fraction`` of the voxel y range,
which is posterior in the template's RAS orientation; train: the rest; no voxel is
shared).  The template is left-right symmetric, so a left/right split would not be
held out -- hence the split along y.  (The trainer's default patch is 24^3.)
"""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .cache import fetch_pypi_file

__all__ = [
    "BRAIN_FILES",
    "BRAIN_PACKAGE",
    "BRAIN_VERSION",
    "PROB_THRESHOLD",
    "BrainPatches",
    "NiftiImage",
    "augment",
    "load_brain_patches",
    "load_mni152",
    "read_nifti",
    "tissue_labels",
    "write_nifti",
]

BRAIN_PACKAGE = "nilearn"
BRAIN_VERSION = "0.14.1"
_PREFIX = "nilearn/datasets/data/mni_icbm152_{}_tal_nlin_sym_09a_converted.nii.gz"
BRAIN_FILES = {k: _PREFIX.format(k) for k in ("t1", "gm", "wm")}
#: A voxel is grey or white matter when max(p_gm, p_wm) >= this, background otherwise.
PROB_THRESHOLD = 0.5

# NIfTI-1 datatype codes -> numpy dtypes
_DTYPES = {2: np.uint8, 4: np.int16, 8: np.int32, 16: np.float32, 64: np.float64,
           256: np.int8, 512: np.uint16, 768: np.uint32, 1024: np.int64, 1280: np.uint64}


@dataclass
class NiftiImage:
    """Voxel data (``(X, Y, Z[, T...])``, x fastest in the file) and a few header fields."""

    data: np.ndarray
    pixdim: tuple[float, ...]
    datatype: int
    scl_slope: float
    scl_inter: float


def read_nifti(path: str | Path, scale: bool = True) -> NiftiImage:
    """Read a single-file NIfTI-1 image (``.nii`` or ``.nii.gz``, either byte order).

    Applies ``scl_slope`` / ``scl_inter`` when ``scale`` and the slope is neither 0 nor
    (1, 0), which returns float64.  Raises ``ValueError`` on anything else than NIfTI-1
    single-file (``n+1``) images with a supported datatype.
    """
    path = Path(path)
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    raw = gzip.open(path, "rb").read() if gz else path.read_bytes()
    if len(raw) < 348:
        raise ValueError(f"{path.name}: shorter than a NIfTI-1 header")
    for endian in ("<", ">"):
        if struct.unpack(endian + "i", raw[:4])[0] == 348:
            break
    else:
        raise ValueError(f"{path.name}: not NIfTI-1 (sizeof_hdr != 348)")
    magic = raw[344:348]
    if magic != b"n+1\x00":
        raise ValueError(f"{path.name}: magic {magic!r}, only single-file NIfTI-1 (n+1)")
    dim = struct.unpack(endian + "8h", raw[40:56])
    datatype, _bitpix = struct.unpack(endian + "hh", raw[70:74])
    pixdim = struct.unpack(endian + "8f", raw[76:108])
    vox_offset = int(struct.unpack(endian + "f", raw[108:112])[0])
    slope, inter = struct.unpack(endian + "ff", raw[112:120])
    if datatype not in _DTYPES:
        raise ValueError(f"{path.name}: unsupported NIfTI datatype {datatype}")
    ndim = dim[0]
    if not 1 <= ndim <= 7:
        raise ValueError(f"{path.name}: bad dim[0] = {ndim}")
    shape = tuple(int(d) for d in dim[1:1 + ndim])
    dtype = np.dtype(_DTYPES[datatype]).newbyteorder(endian)
    count = int(np.prod(shape))
    need = vox_offset + count * dtype.itemsize
    if len(raw) < need:
        raise ValueError(f"{path.name}: truncated ({len(raw)} bytes, need {need})")
    data = np.frombuffer(raw, dtype=dtype, count=count, offset=vox_offset)
    data = data.reshape(shape, order="F").astype(dtype.newbyteorder("="))
    if scale and slope not in (0.0,) and not (slope == 1.0 and inter == 0.0):
        data = data.astype(np.float64) * slope + inter
    return NiftiImage(data=data, pixdim=tuple(pixdim[1:1 + ndim]), datatype=int(datatype),
                      scl_slope=float(slope), scl_inter=float(inter))


def write_nifti(path: str | Path, data: np.ndarray, pixdim=(1.0, 1.0, 1.0),
                scl_slope: float = 0.0, scl_inter: float = 0.0) -> Path:
    """Write a minimal single-file NIfTI-1 (little endian, gzip if ``.gz``); for tests."""
    code = {np.dtype(v): k for k, v in _DTYPES.items()}[np.dtype(data.dtype)]
    hdr = bytearray(348)
    struct.pack_into("<i", hdr, 0, 348)
    dims = [data.ndim, *data.shape] + [1] * (7 - data.ndim)
    struct.pack_into("<8h", hdr, 40, *dims)
    struct.pack_into("<hh", hdr, 70, code, data.dtype.itemsize * 8)
    struct.pack_into("<8f", hdr, 76, 1.0, *(list(pixdim) + [1.0] * (7 - len(pixdim))))
    struct.pack_into("<f", hdr, 108, 352.0)
    struct.pack_into("<ff", hdr, 112, scl_slope, scl_inter)
    hdr[344:348] = b"n+1\x00"
    raw = bytes(hdr) + b"\x00" * 4 + np.asarray(data).astype(
        data.dtype.newbyteorder("<")).tobytes(order="F")
    path = Path(path)
    path.write_bytes(gzip.compress(raw) if path.suffix == ".gz" else raw)
    return path


def _downsample2(v: np.ndarray) -> np.ndarray:
    sx, sy, sz = (s // 2 * 2 for s in v.shape)
    v = v[:sx, :sy, :sz].astype(np.float64)
    return v.reshape(sx // 2, 2, sy // 2, 2, sz // 2, 2).mean(axis=(1, 3, 5))


def load_mni152(resolution: int = 2) -> dict[str, np.ndarray]:
    """``{'t1', 'gm', 'wm'}`` float64 volumes of the MNI152 2009a template; probability
    maps scaled to [0, 1] by their maximum (stored as uint8 0..255 in the files).
    ``resolution`` 1 (197x233x189) or 2 (98x116x94, 2x2x2 block means)."""
    if resolution not in (1, 2):
        raise ValueError("resolution must be 1 or 2 (mm)")
    out = {}
    for key, member in BRAIN_FILES.items():
        img = read_nifti(fetch_pypi_file(BRAIN_PACKAGE, BRAIN_VERSION, member))
        v = img.data.astype(np.float64)
        if key != "t1":
            v = v / max(float(v.max()), 1e-12)
        out[key] = _downsample2(v) if resolution == 2 else v
    return out


def tissue_labels(gm: np.ndarray, wm: np.ndarray, threshold: float = PROB_THRESHOLD
                  ) -> np.ndarray:
    """int64 labels: 0 background, 1 grey matter, 2 white matter (argmax + threshold)."""
    lab = np.where(wm > gm, 2, 1)
    lab[np.maximum(gm, wm) < threshold] = 0
    return lab.astype(np.int64)


@dataclass
class BrainPatches:
    """``x`` float32 ``(N, 1, P, P, P)``, ``y`` int64 ``(N, P, P, P)`` per split, and the
    patch origins (voxel coordinates in the template) for provenance."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    origins_train: np.ndarray
    origins_val: np.ndarray
    y_split: int  # validation patches lie in y < y_split, train patches in y >= y_split


def _sample_origins(lab: np.ndarray, n: int, patch: int, y_lo: int, y_hi: int,
                    rng: np.random.Generator, min_fg: float) -> np.ndarray:
    X, _, Z = lab.shape
    if y_hi - y_lo < patch:
        raise ValueError(f"region y in [{y_lo}, {y_hi}) narrower than the patch {patch}")
    fg = (lab > 0).astype(np.float64)
    origins = []
    tries = 0
    while len(origins) < n:
        tries += 1
        if tries > 200 * n:
            raise RuntimeError("could not find enough patches with brain tissue")
        o = (rng.integers(0, X - patch + 1), rng.integers(y_lo, y_hi - patch + 1),
             rng.integers(0, Z - patch + 1))
        block = fg[o[0]:o[0] + patch, o[1]:o[1] + patch, o[2]:o[2] + patch]
        if block.mean() >= min_fg:
            origins.append(o)
    return np.array(origins, dtype=np.int64)


def _cut(vol: np.ndarray, origins: np.ndarray, patch: int) -> np.ndarray:
    return np.stack([vol[a:a + patch, b:b + patch, c:c + patch] for a, b, c in origins])


def load_brain_patches(n_train: int = 256, n_val: int = 64, patch: int = 32,
                       resolution: int = 2, val_fraction: float = 0.3, seed: int = 0,
                       min_fg: float = 0.2) -> BrainPatches:
    """Seeded 3-class segmentation patches from the MNI152 template (see module doc).

    Validation patches lie in the low-y (posterior) ``val_fraction`` of the template's
    y range, train patches in the rest (disjoint voxels); each patch has at least
    ``min_fg`` brain tissue.  No augmentation here: see :func:`augment`.
    """
    vols = load_mni152(resolution)
    lab = tissue_labels(vols["gm"], vols["wm"])
    t1 = vols["t1"]
    head = t1 > 0
    t1n = (t1 / np.percentile(t1[head], 99)).astype(np.float32)
    Y = lab.shape[1]
    y_split = int(round(Y * val_fraction))
    rng = np.random.default_rng(seed)
    o_val = _sample_origins(lab, n_val, patch, 0, y_split, rng, min_fg)
    o_train = _sample_origins(lab, n_train, patch, y_split, Y, rng, min_fg)
    x_tr = _cut(t1n, o_train, patch)[:, None]
    x_va = _cut(t1n, o_val, patch)[:, None]
    return BrainPatches(
        x_train=np.ascontiguousarray(x_tr, dtype=np.float32), y_train=_cut(lab, o_train, patch),
        x_val=np.ascontiguousarray(x_va, dtype=np.float32), y_val=_cut(lab, o_val, patch),
        origins_train=o_train, origins_val=o_val, y_split=y_split)


def augment(x: np.ndarray, y: np.ndarray, rng: np.random.Generator,
            jitter: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """Random flips along each spatial axis (same for x and y) and intensity jitter
    ``x * U(1 - jitter, 1 + jitter) + U(-jitter / 2, jitter / 2)`` per patch.

    ``x``: ``(N, C, D, H, W)``, ``y``: ``(N, D, H, W)``; returns new arrays.
    """
    x = x.copy()
    y = y.copy()
    for i in range(len(x)):
        for ax in range(3):
            if rng.random() < 0.5:
                x[i] = np.flip(x[i], axis=ax + 1)
                y[i] = np.flip(y[i], axis=ax)
        x[i] = x[i] * rng.uniform(1 - jitter, 1 + jitter) + rng.uniform(-jitter / 2, jitter / 2)
    return x, y

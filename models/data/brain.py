"""Brain tissue segmentation patches from the real MNI152 2009 template (nilearn's copy).

Source: the ``nilearn==0.14.1`` wheel on PyPI ships the ICBM 2009a symmetric MNI152
template at 1 mm (197 x 233 x 189 voxels, uint8), as three NIfTI-1 files:

* ``nilearn/datasets/data/mni_icbm152_t1_tal_nlin_sym_09a_converted.nii.gz`` (T1),
* ``..._gm_...`` and ``..._wm_...`` (grey / white matter probability maps).

(Only the 1 mm version is in the wheel; :func:`load_mni152` makes the 2 mm one by 2x2x2
block averaging.)  The files are fetched once with
:func:`tessera.models.data.cache.fetch_pypi_file` (nilearn itself is not installed) and
read with nibabel (:func:`read_nifti`).

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

@dataclass
class NiftiImage:
    """Voxel data (``(X, Y, Z[, T...])``, x fastest in the file), the voxel sizes, the NIfTI
    datatype code and the intensity scaling the file declares (slope 1, intercept 0: none)."""

    data: np.ndarray
    pixdim: tuple[float, ...]
    datatype: int
    scl_slope: float
    scl_inter: float


def read_nifti(path: str | Path, scale: bool = True) -> NiftiImage:
    """Read a single-file NIfTI-1 image (``.nii`` or ``.nii.gz``) with nibabel.

    With ``scale`` and a header slope / intercept other than none (slope 0, or 1 and 0),
    returns the scaled float64 data; otherwise the stored values in their own dtype.
    Raises ``ValueError`` naming the file for anything but a readable NIfTI-1 image.
    """
    import nibabel as nib

    path = Path(path)
    try:
        img = nib.load(str(path))
    except Exception as exc:  # nibabel's ImageFileError and friends: not an image it knows
        raise ValueError(f"{path.name}: not a NIfTI-1 image ({' '.join(str(exc).split())[:120]})") from None
    if type(img) is not nib.Nifti1Image:
        raise ValueError(f"{path.name}: a {type(img).__name__}, only single-file NIfTI-1 images are read")
    hdr = img.header  # (nibabel moves the file's scl_slope / scl_inter into the data proxy)
    slope, inter = float(img.dataobj.slope), float(img.dataobj.inter)
    try:
        if scale and (slope, inter) != (1.0, 0.0):
            data = img.get_fdata(dtype=np.float64)
        else:
            raw = np.asarray(img.dataobj.get_unscaled())
            data = raw.astype(raw.dtype.newbyteorder("="))  # native byte order
    except Exception as exc:  # the data block is shorter than the header says, or corrupt
        raise ValueError(f"{path.name}: truncated or corrupt image data ({' '.join(str(exc).split())[:120]})") from None
    return NiftiImage(data=data, pixdim=tuple(float(z) for z in hdr.get_zooms()[:data.ndim]),
                      datatype=int(hdr["datatype"]), scl_slope=slope, scl_inter=inter)


def write_nifti(path: str | Path, data: np.ndarray, pixdim=(1.0, 1.0, 1.0),
                scl_slope: float = 0.0, scl_inter: float = 0.0) -> Path:
    """Write a single-file NIfTI-1 image with nibabel (gzip if ``.gz``); for tests."""
    import nibabel as nib

    img = nib.Nifti1Image(np.asarray(data), affine=np.diag([*pixdim, 1.0]))
    img.header.set_zooms(tuple(pixdim))
    if scl_slope:
        img.header.set_slope_inter(scl_slope, scl_inter)
    path = Path(path)
    nib.save(img, str(path))
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

"""Synthetic CosmoFlow-style data: Zel'dovich dark-matter density volumes with known cosmology.

Every sample is a ``S^3`` volume of (cloud-in-cell) particle counts at 4 redshifts (the 4
channels, as in CosmoFlow), generated locally and exactly reproducibly from a seed:

1. Cosmological parameters ``(Omega_m, sigma_8, n_s, H0)`` drawn uniformly from
   :data:`PARAM_RANGES`; the regression targets are these parameters mapped linearly to
   [-1, 1] (``unitPar``), the physical values are kept too (``physPar``).
2. The linear matter power spectrum at z = 0 from **CAMB** (``camb==2.0.5`` from PyPI,
   flat LCDM, ``ombh2`` = 0.0224 fixed, massless neutrinos so that
   ``omch2 = Omega_m h^2 - ombh2`` exactly, ``As`` = 2e-9 then the spectrum rescaled by
   ``(sigma_8 / sigma_8^CAMB)^2`` -- exact in linear theory, where P scales with As).
   The linear growth factors ``D(z) / D(0)`` of the 4 redshifts are CAMB's
   ``sigma_8(z) / sigma_8(0)`` of the same run.  One CAMB run takes 0.5-1 s; a cosmology
   can be shared by ``samples_per_cosmology`` independent realizations (CosmoFlow also
   cuts several sub-volumes from one simulation).  The default is 1: with 4 realizations
   per cosmology (102 training cosmologies of 512 samples) the small MLPerf model's
   validation MSE on n_s and H0 ended *above* the train-mean predictor's (0.41 / 0.45 vs
   about 0.33 / 0.36) -- it memorised the training cosmologies.
3. A Gaussian random field with that spectrum on a periodic grid (seeded white noise,
   FFT), the Zel'dovich displacement field ``Psi(k) = i k / k^2 delta(k)``, one particle per
   voxel displaced by ``D(z) Psi`` and deposited with cloud-in-cell (periodic) -- mean 1
   particle per voxel, like CosmoFlow's 512^3 particles on 512^3 voxels.

This is first-order Lagrangian perturbation theory, not an N-body simulation: no
non-linear clustering beyond shell crossing.  The targets are exact by construction.

Files use CosmoFlow's HDF5 layout (one file per sample): dataset ``full`` of shape
``(S, S, S, 4)`` (channels last; float32 CIC counts here, int16 NGP counts in CosmoFlow)
and ``unitPar`` (4,) float32 with the normalized targets; plus ``physPar`` (4,) and
attributes describing the generation.  Key names follow the CosmoFlow / MLPerf HPC
preprocessing scripts as we remember them (``full``, ``unitPar``) -- they are arguments
of :func:`read_sample` / :func:`read_hyperslab` if a user's files differ.  Models get
``log1p(counts)``, CosmoFlow's preprocessing, channels first ``(4, S, S, S)``.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from .cache import DataUnavailable, cache_dir

__all__ = [
    "CosmologyConfig",
    "augment",
    "PARAM_NAMES",
    "PARAM_RANGES",
    "VOLUME_KEY",
    "TARGET_KEY",
    "cic_deposit",
    "density_volume",
    "generate_cosmology",
    "linear_power",
    "load_cosmology",
    "normalize_params",
    "read_hyperslab",
    "read_sample",
    "unnormalize_params",
    "write_sample",
]

PARAM_NAMES = ("Omega_m", "sigma_8", "n_s", "H0")
#: Uniform prior of each parameter; targets are mapped linearly from these to [-1, 1].
PARAM_RANGES = ((0.20, 0.40), (0.60, 1.00), (0.85, 1.05), (60.0, 80.0))
OMBH2 = 0.0224
VOLUME_KEY = "full"
TARGET_KEY = "unitPar"
PHYS_KEY = "physPar"
CAMB_VERSION = "2.0.5"


def normalize_params(phys: np.ndarray) -> np.ndarray:
    """Physical ``(..., 4)`` parameters -> targets in [-1, 1]."""
    lo = np.array([r[0] for r in PARAM_RANGES])
    hi = np.array([r[1] for r in PARAM_RANGES])
    return (2.0 * (np.asarray(phys, dtype=np.float64) - lo) / (hi - lo) - 1.0).astype(np.float32)


def unnormalize_params(unit: np.ndarray) -> np.ndarray:
    """Inverse of :func:`normalize_params`."""
    lo = np.array([r[0] for r in PARAM_RANGES])
    hi = np.array([r[1] for r in PARAM_RANGES])
    return lo + (np.asarray(unit, dtype=np.float64) + 1.0) * 0.5 * (hi - lo)


# ---------------------------------------------------------------------------------------
# Physics
# ---------------------------------------------------------------------------------------


def _import_camb():
    try:
        import camb  # noqa: F401
    except ImportError:
        raise DataUnavailable(
            f"the cosmology data set needs CAMB: pip install camb=={CAMB_VERSION}") from None
    return camb


def linear_power(omega_m: float, sigma_8: float, n_s: float, h0: float,
                 redshifts: Sequence[float], kmax: float = 2.0, npoints: int = 256
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CAMB linear matter power at z = 0, normalised to ``sigma_8``, and growth factors.

    Returns ``(k [h/Mpc], P(k) [(Mpc/h)^3], D(z)/D(0) for each of redshifts)``.
    """
    camb = _import_camb()
    h = h0 / 100.0
    omch2 = omega_m * h * h - OMBH2
    if omch2 <= 0:
        raise ValueError(f"Omega_m={omega_m} too small for ombh2={OMBH2}")
    zs = sorted(set(float(z) for z in redshifts) | {0.0}, reverse=True)  # CAMB wants descending
    pars = camb.set_params(H0=h0, ombh2=OMBH2, omch2=omch2, mnu=0.0, num_massive_neutrinos=0,
                           ns=n_s, As=2e-9, WantTransfer=True, WantCls=False, kmax=kmax)
    pars.set_matter_power(redshifts=zs, kmax=kmax)
    pars.NonLinear = camb.model.NonLinear_none
    res = camb.get_results(pars)
    kh, z_out, pk = res.get_matter_power_spectrum(minkh=1e-4, maxkh=kmax, npoints=npoints)
    s8 = np.asarray(res.get_sigma8())  # same (descending) order as zs
    s8_by_z = dict(zip(zs, s8))
    p0 = pk[list(z_out).index(0.0)] * (sigma_8 / s8_by_z[0.0]) ** 2
    growth = np.array([s8_by_z[float(z)] / s8_by_z[0.0] for z in redshifts])
    return np.asarray(kh), np.asarray(p0), growth


def _kgrid(n: int, box: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    k1 = 2.0 * np.pi * np.fft.fftfreq(n, d=box / n)
    kz = 2.0 * np.pi * np.fft.rfftfreq(n, d=box / n)
    return k1[:, None, None], k1[None, :, None], kz[None, None, :]


def cic_deposit(pos: np.ndarray, n: int) -> np.ndarray:
    """Cloud-in-cell counts of unit-mass particles at ``pos`` (``(P, 3)``, in voxel units,
    periodic in ``[0, n)``; voxel ``i`` is centred on ``i``) on an ``n^3`` grid."""
    grid = np.zeros(n * n * n, dtype=np.float64)
    base = np.floor(pos).astype(np.int64)
    frac = pos - base
    for dx in (0, 1):
        wx = frac[:, 0] if dx else 1.0 - frac[:, 0]
        ix = (base[:, 0] + dx) % n
        for dy in (0, 1):
            wy = frac[:, 1] if dy else 1.0 - frac[:, 1]
            iy = (base[:, 1] + dy) % n
            for dz in (0, 1):
                wz = frac[:, 2] if dz else 1.0 - frac[:, 2]
                iz = (base[:, 2] + dz) % n
                grid += np.bincount((ix * n + iy) * n + iz, weights=wx * wy * wz,
                                    minlength=n * n * n)
    return grid.reshape(n, n, n)


def density_volume(k: np.ndarray, pk: np.ndarray, growth: Sequence[float], size: int,
                   cell: float, rng: np.random.Generator) -> np.ndarray:
    """Zel'dovich CIC counts ``(size, size, size, len(growth))`` float32 of one realization
    of the linear spectrum ``pk(k)`` (``k`` in h/Mpc, ``cell`` in Mpc/h)."""
    n = int(size)
    box = n * cell
    white = rng.standard_normal((n, n, n))
    kx, ky, kz = _kgrid(n, box)
    kk = np.sqrt(kx * kx + ky * ky + kz * kz)
    with np.errstate(divide="ignore"):
        amp = np.sqrt(np.exp(np.interp(np.log(np.maximum(kk, 1e-12)), np.log(k), np.log(pk),
                                       left=-np.inf)) / cell ** 3)
    amp[0, 0, 0] = 0.0
    delta_k = np.fft.rfftn(white) * amp
    k2 = kk * kk
    k2[0, 0, 0] = 1.0
    q = np.stack(np.meshgrid(np.arange(n), np.arange(n), np.arange(n), indexing="ij"),
                 axis=-1).reshape(-1, 3).astype(np.float64)
    psi = np.stack([np.fft.irfftn(1j * kc / k2 * delta_k, s=(n, n, n), axes=(0, 1, 2)).reshape(-1)
                    for kc in (kx, ky, kz)], axis=-1) / cell  # voxel units
    out = np.empty((n, n, n, len(growth)), dtype=np.float32)
    for c, d in enumerate(growth):
        out[..., c] = cic_deposit(np.mod(q + d * psi, n), n)
    return out


# ---------------------------------------------------------------------------------------
# HDF5 layout
# ---------------------------------------------------------------------------------------


def write_sample(path: str | Path, volume: np.ndarray, unit_par: np.ndarray,
                 phys_par: np.ndarray | None = None, attrs: dict | None = None) -> Path:
    """Write one sample in the CosmoFlow layout (``full``: ``(S, S, S, C)``, ``unitPar``),
    atomically."""
    import h5py

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".h5.part", dir=path.parent)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            f.create_dataset(VOLUME_KEY, data=volume)
            f.create_dataset(TARGET_KEY, data=np.asarray(unit_par, dtype=np.float32))
            if phys_par is not None:
                f.create_dataset(PHYS_KEY, data=np.asarray(phys_par, dtype=np.float32))
            for key, val in (attrs or {}).items():
                f.attrs[key] = val
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path


def read_hyperslab(path: str | Path, start: Sequence[int], shape: Sequence[int],
                   volume_key: str = VOLUME_KEY) -> np.ndarray:
    """Raw sub-volume ``full[z0:z0+dz, y0:y0+dy, x0:x0+dx, :]`` (channels last, stored
    dtype), read by h5py as a hyperslab selection: only that region is read from disk."""
    import h5py

    if len(start) != 3 or len(shape) != 3:
        raise ValueError("start and shape are (z, y, x) triples")
    sl = tuple(slice(int(a), int(a) + int(b)) for a, b in zip(start, shape))
    with h5py.File(path, "r") as f:
        ds = f[volume_key]
        for a, b, n in zip(start, shape, ds.shape[:3]):
            if a < 0 or b < 1 or a + b > n:
                raise ValueError(f"hyperslab {tuple(start)}+{tuple(shape)} outside {ds.shape}")
        return ds[sl + (slice(None),)]


def read_sample(path: str | Path, volume_key: str = VOLUME_KEY, target_key: str = TARGET_KEY,
                log1p: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)``: ``x`` float32 ``(C, S, S, S)`` (``log1p`` of the counts by default,
    channels first), ``y`` float32 targets."""
    import h5py

    with h5py.File(path, "r") as f:
        vol = np.asarray(f[volume_key][...], dtype=np.float32)
        y = np.asarray(f[target_key][...], dtype=np.float32)
    if log1p:
        vol = np.log1p(vol)
    return np.ascontiguousarray(np.moveaxis(vol, -1, 0)), y


# ---------------------------------------------------------------------------------------
# Generation and loading
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CosmologyConfig:
    """Everything that determines the generated files (part of the cache folder name)."""

    n_samples: int = 512
    size: int = 32
    samples_per_cosmology: int = 1
    cell: float = 4.0  # Mpc/h per voxel
    redshifts: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5)
    seed: int = 0

    def tag(self) -> str:
        z = "-".join(f"{z:g}" for z in self.redshifts)
        return (f"n{self.n_samples}_s{self.size}_r{self.samples_per_cosmology}_"
                f"c{self.cell:g}_z{z}_seed{self.seed}")


def _progress(enabled: bool):
    from contextlib import nullcontext

    if not enabled:
        return nullcontext(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, \
        TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn())


def generate_cosmology(out_dir: str | Path | None = None, config: CosmologyConfig | None = None,
                       progress: bool = True) -> Path:
    """Generate ``config.n_samples`` files ``univ_XXXXXX.h5`` into ``out_dir`` (default
    ``<cache>/cosmology/<config.tag()>``) unless they are already there; returns the folder.

    Seeded: cosmology ``j`` uses ``default_rng([seed, j])`` for its parameters and
    ``default_rng([seed, j, r])`` for realization ``r``.  A ``manifest.json`` with the
    config is written last; a folder without it is (re)completed file by file.
    """
    cfg = config or CosmologyConfig()
    out = Path(out_dir) if out_dir is not None else cache_dir() / "cosmology" / cfg.tag()
    manifest = out / "manifest.json"
    if manifest.is_file() and json.loads(manifest.read_text()).get("config") == \
            json.loads(json.dumps(asdict(cfg))):
        return out
    out.mkdir(parents=True, exist_ok=True)
    _import_camb()
    n_cosmo = -(-cfg.n_samples // cfg.samples_per_cosmology)
    kmax = max(2.0, 1.1 * np.sqrt(3.0) * np.pi / cfg.cell)
    with _progress(progress) as bar:
        task = bar.add_task("cosmology volumes", total=cfg.n_samples) if bar else None
        for j in range(n_cosmo):
            idx = [j * cfg.samples_per_cosmology + r for r in range(cfg.samples_per_cosmology)]
            idx = [i for i in idx if i < cfg.n_samples]
            paths = [out / f"univ_{i:06d}.h5" for i in idx]
            if all(p.is_file() for p in paths):
                if bar:
                    bar.update(task, advance=len(idx))
                continue
            prng = np.random.default_rng([cfg.seed, j])
            phys = np.array([prng.uniform(lo, hi) for lo, hi in PARAM_RANGES])
            k, pk, growth = linear_power(*phys, redshifts=cfg.redshifts, kmax=kmax)
            for r, (i, p) in enumerate(zip(idx, paths)):
                if not p.is_file():
                    vol = density_volume(k, pk, growth, cfg.size, cfg.cell,
                                         np.random.default_rng([cfg.seed, j, r]))
                    write_sample(p, vol, normalize_params(phys), phys, attrs={
                        "cosmology_index": j, "realization": r, "cell_mpc_h": cfg.cell,
                        "redshifts": np.asarray(cfg.redshifts, dtype=np.float64),
                        "growth": growth, "param_names": ",".join(PARAM_NAMES),
                        "generator": "tessera Zel'dovich CIC, CAMB linear P(k)"})
                if bar:
                    bar.update(task, advance=1)
    manifest.write_text(json.dumps({"config": asdict(cfg), "camb": CAMB_VERSION,
                                    "param_names": PARAM_NAMES,
                                    "param_ranges": PARAM_RANGES}, indent=2) + "\n")
    return out


def load_cosmology(config: CosmologyConfig | None = None, val_fraction: float = 0.2,
                   root: str | Path | None = None, progress: bool = True
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x_train, y_train, x_val, y_val)``: x float32 ``(N, 4, S, S, S)`` = log1p(counts),
    y float32 ``(N, 4)`` in [-1, 1].  Generates the files at first use (see
    :func:`generate_cosmology`).  The split is by cosmology: the last ``val_fraction`` of
    the cosmologies (all their realizations) are held out.
    """
    cfg = config or CosmologyConfig()
    folder = generate_cosmology(root, cfg, progress)
    xs, ys = [], []
    for i in range(cfg.n_samples):
        x, y = read_sample(folder / f"univ_{i:06d}.h5")
        xs.append(x)
        ys.append(y)
    x, y = np.stack(xs), np.stack(ys)
    n_cosmo = -(-cfg.n_samples // cfg.samples_per_cosmology)
    n_val_cosmo = max(1, int(round(n_cosmo * val_fraction)))
    cosmo = np.arange(cfg.n_samples) // cfg.samples_per_cosmology
    val = cosmo >= n_cosmo - n_val_cosmo
    return x[~val], y[~val], x[val], y[val]


def augment(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exact symmetries of a periodic, statistically isotropic box, drawn per sample: a
    random permutation of the three spatial axes, a random flip of each, and a random
    periodic shift along each.  None of them changes the cosmological parameters, so the
    targets stay as they are (CosmoFlow trains with such flips/rotations as well).

    ``x``: ``(N, C, D, H, W)``; returns a new array.
    """
    out = np.empty_like(x)
    for i in range(len(x)):
        v = np.transpose(x[i], (0, *(1 + rng.permutation(3))))
        for ax in range(1, 4):
            if rng.random() < 0.5:
                v = np.flip(v, axis=ax)
        out[i] = np.roll(v, tuple(int(s) for s in rng.integers(0, v.shape[1:], size=3)),
                         axis=(1, 2, 3))
    return out

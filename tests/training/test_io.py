"""Acceptance 3: every rank reads only its hyperslab of a sample (bytes measured)."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.models.data.cosmology import write_sample
from tessera.training.data import ShardReader, hyperslab_bytes
from tessera.training.halo import blocks
from tessera.training.samples import Samples, augment_index


@pytest.fixture
def sample(tmp_path):
    vol = np.random.default_rng(3).gamma(1.0, 1.0, size=(11, 11, 11, 4)).astype(np.float32)
    return write_sample(tmp_path / "univ_000000.h5", vol, np.arange(4, dtype=np.float32) / 4), vol


@pytest.mark.parametrize("grid", [(2, 1, 1), (1, 2, 2), (2, 2, 2), (1, 1, 3)])
def test_each_rank_reads_its_hyperslab(sample, grid):
    path, vol = sample
    total = 0
    for span in blocks(vol.shape[:3], grid):
        r = ShardReader(span)
        x, y = r.read(path)
        want = np.moveaxis(np.log1p(vol[tuple(slice(a, b) for a, b in span)]), -1, 0)
        assert np.array_equal(x, want)
        assert np.array_equal(y, np.arange(4) / 4)
        assert r.stats.data_bytes == hyperslab_bytes(span, 4, 4)
        assert r.stats.meta_bytes < 16 * 1024  # file headers and the 16-byte target, not the volume
        total += r.stats.data_bytes
    assert total == vol.nbytes  # the blocks tile the sample: nothing read twice


def test_a_block_with_its_halo_reads_block_plus_halo(sample):
    path, vol = sample
    span = ((4, 9), (0, 6), (2, 11))  # a block widened by a halo, clipped at the volume
    r = ShardReader(span)
    r.read(path)
    assert r.stats.data_bytes == 5 * 6 * 9 * 4 * 4


def test_augmented_block_is_the_block_of_the_augmented_volume(sample):
    path, vol = sample
    x_full = np.moveaxis(np.log1p(vol), -1, 0)
    for seed in range(6):
        sym = augment_index(11, np.random.default_rng(seed))
        perm, flips, shifts = sym
        v = np.transpose(x_full, (0, *(1 + np.asarray(perm))))
        for ax in range(3):
            if flips[ax]:
                v = np.flip(v, axis=1 + ax)
        v = np.roll(v, shifts, axis=(1, 2, 3))
        for span in blocks((11, 11, 11), (2, 2, 1)):
            s = Samples(path.parent, 1, span, 11)
            x, _ = s._read_augmented(path, sym)
            assert np.array_equal(x, v[(slice(None),) + tuple(slice(a, b) for a, b in span)])
            assert s.reader.stats.data_bytes == hyperslab_bytes(span, 4, 4)  # wrapped runs, no row twice

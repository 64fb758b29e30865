"""The training performance model (tessera.training.perfmodel): FLOP and halo counts against
direct counts, the memory relation, the chooser, the commands.  A synthetic calibration
(:func:`_calibration`) keeps these fast; ``test_calibrate_quick`` runs the real
microbenchmarks in their quick mode (2 gloo processes)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from tessera.cli import main as cli
from tessera.compiler.partition.regions import grid_blocks, window_input
from tessera.models.cnn3d import count_macs
from tessera.training.mesh import Mesh, SpatialGrid as G
from tessera.training.perfmodel import (OP_KINDS, Calibration, Curve, PlanError, fastest, fit_link, candidates, choose,
                                        model_spec, predict, tail_start)
from tessera.training.spatial import SpatialModel

SIZE, WIDTH = 16, 0.125


def _calibration(cores: int = 2) -> Calibration:
    """Kind-level points only (every shape falls back to its kind): 1 ms per call plus
    1 GFLOP/s or 1 G elements/s; 2 threads twice as fast."""
    def pts(t):
        return [[1.0, 1e-3], [1e9, 1e-3 + 1.0 / t]]

    compute = {str(t): {f"{k}/synthetic": pts(t) for k in OP_KINDS} for t in (1, 2)}
    return Calibration(
        cores=cores, threads=[1, 2], compute=compute, saved={f"{k}/synthetic": [8.0, 100.0] for k in OP_KINDS},
        p2p={"2": [1e-4, 1e-9], "4": [2e-4, 1e-9]}, allreduce={"2": [1e-4, 1e-9], "4": [3e-4, 2e-9]},
        allgather={"2": [1e-4, 1e-9], "4": [3e-4, 2e-9]},
        io={"sample_alpha": 1e-3, "sample_beta": 1e-9, "target_alpha": 1e-4},
        adam={"1": [[1e5, 1e-3]], "2": [[1e5, 5e-4]]}, meta={"synthetic": True})


@pytest.fixture(scope="module")
def spec():
    return model_spec("cosmoflow", WIDTH, SIZE)


def test_flops_equal_the_models_own_count(spec):
    """Forward FLOPs of one sample = 2 x the MACs the model's forward hooks count, and the
    spatial ranks' shares of the sharded layers add up to the unsharded figure."""
    from tessera.models.cnn3d import build_cnn3d
    from tessera.models.train3d import DEFAULTS

    net = build_cnn3d("cosmoflow", width=WIDTH, input_size=SIZE, in_channels=4, n_out=4,
                      **DEFAULTS["cosmoflow"]["options"])
    cal = _calibration()
    one = predict(cal, spec, 1, G(), 1)
    assert one.flops == 2 * count_macs(net, (4, SIZE, SIZE, SIZE))
    for grid in (G(2, 1, 1), G(1, 2, 2), G(2, 2, 2)):
        ranks = predict(cal, spec, 1, grid, 1, slowest=False)
        sharded = sum(lt.flops for p in ranks for lt in p.layers if not lt.tail)
        tail = [lt.flops for lt in ranks[0].layers if lt.tail]
        cut = tail_start(spec, grid)
        assert sharded + sum(tail) == sum(lt.flops for lt in one.layers), grid
        assert len(tail) == len(spec.layers) - cut


def test_tail_cut_is_spatial_models(spec):
    """The modelled gather point is the one SpatialModel picks."""
    from tessera.models.cnn3d import build_cnn3d
    from tessera.models.train3d import DEFAULTS

    for grid in (G(), G(2, 1, 1), G(4, 1, 1), G(2, 2, 2), G(1, 1, 8)):
        net = build_cnn3d("cosmoflow", width=WIDTH, input_size=SIZE, in_channels=4, n_out=4,
                          **DEFAULTS["cosmoflow"]["options"])
        mesh = Mesh(1, grid, 0, torch.device("cpu"), None, None, None)
        sm = SpatialModel(net, mesh, (SIZE,) * 3)
        cut = tail_start(spec, grid)
        names = [lay.name for lay in spec.layers[cut:]]
        first_tail = f"features.{sm._cut}" if sm._cut < len(net.features) else "head.0"
        assert names[0] == first_tail, grid


def test_halo_bytes_equal_the_partition_regions(spec):
    """Each sharded conv's received halo = (its clipped input span from the partition rules
    minus its own block) x channels x batch x 4 bytes, for every rank."""
    cal = _calibration()
    grid, batch = G(2, 2, 1), 3
    ranks = predict(cal, spec, 1, grid, batch, slowest=False)
    convs = [lay for lay in spec.layers if lay.kind == "conv3d" and lay.index < tail_start(spec, grid)]
    assert convs
    for s, p in enumerate(ranks):
        by_name = {lt.name: lt for lt in p.layers}
        for lay in convs:
            own_in = dict(grid_blocks(lay.in_extent, grid.dims))
            own_out = dict(grid_blocks(lay.out_extent, grid.dims))
            idx = list(own_out)[s]
            need = [window_input(a, b, lay.kernel[d], lay.stride[d], lay.padding[d])
                    for d, (a, b) in enumerate(own_out[idx])]
            need = [(max(0, lo), min(n, hi)) for (lo, hi), n in zip(need, lay.in_extent)]
            vol = math.prod(hi - lo for lo, hi in need) - math.prod(b - a for a, b in own_in[idx])
            assert by_name[lay.name].halo_bytes == vol * lay.c_in * batch * 4, (s, lay.name)


def test_memory_relation_and_monotone(spec):
    """Per rank: activations = the single-rank figure's share + the received halos (the
    measured relation of docs/training.md), exactly over the ranks; memory falls with more
    spatial ranks and grows with the batch."""
    cal = _calibration()
    batch = 4
    one = predict(cal, spec, 1, G(), batch)
    act1 = sum(lt.saved_bytes for lt in one.layers if not lt.tail)
    for grid in (G(2, 1, 1), G(2, 2, 1), G(2, 2, 2)):
        ranks = predict(cal, spec, 1, grid, batch, slowest=False)
        cut = tail_start(spec, grid)
        sharded = sum(lt.saved_bytes - lt.halo_bytes for p in ranks for lt in p.layers if not lt.tail)
        act1_cut = sum(lt.saved_bytes for lt in one.layers[:cut])
        assert sharded == pytest.approx(act1_cut, rel=1e-12), grid
        assert all(p.mem["halo"] > 0 for p in ranks)
    mems = [predict(cal, spec, 1, g, batch).mem_bytes for g in (G(), G(2, 1, 1), G(2, 2, 1), G(2, 2, 2))]
    assert mems == sorted(mems, reverse=True) and mems[0] > mems[-1]
    assert predict(cal, spec, 1, G(2, 1, 1), 8).mem_bytes > predict(cal, spec, 1, G(2, 1, 1), 4).mem_bytes
    assert act1 > 0


def test_oversubscription_scales_compute(spec):
    cal = _calibration(cores=2)
    p2 = predict(cal, spec, 2, G(), 8)
    p4 = predict(cal, spec, 4, G(), 8)
    assert p2.oversubscription == 1 and p4.oversubscription == 2 and p4.threads == 1
    assert p4.step_s == pytest.approx(2 * (p4.compute_s + p4.adam_s + p4.io_s) + p4.comm_s)


def test_curve_and_link():
    c = Curve(((10.0, 1.0), (20.0, 3.0), (5.0, 0.5)))
    assert c.seconds(1.0) == 0.5 and c.seconds(15.0) == pytest.approx(2.0)
    assert c.seconds(40.0) == pytest.approx(3.0 + 20 * (2.5 / 15))
    assert Curve(((1.0, 2.0), (2.0, 1.0))).seconds(2.0) == 2.0  # monotone
    link = fit_link([(b, 1e-4 + 2e-9 * b) for b in (8, 4096, 65536, 1 << 20)])
    assert link.alpha == pytest.approx(1e-4, rel=1e-6) and link.beta == pytest.approx(2e-9, rel=1e-6)


def test_candidates_and_chooser(spec):
    cal = _calibration()
    cands = candidates(spec, 4, 8)
    assert len(cands) == 10 and all(d * g.size == 4 for d, g in cands)
    assert all(d <= 2 for d, _ in candidates(spec, 4, 2))
    free = choose(cal, spec, 4, 8)
    assert free.chosen.step_s == min(p.step_s for p in free.predictions)
    mems = sorted({p.mem_bytes for p in free.predictions})
    cap = (mems[0] + mems[-1]) // 2
    capped = choose(cal, spec, 4, 8, cap)
    assert capped.chosen.mem_bytes <= cap
    assert capped.chosen.step_s == min(p.step_s for p in capped.predictions if p.mem_bytes <= cap)
    with pytest.raises(PlanError, match="no decomposition of 4 ranks fits"):
        choose(cal, spec, 4, 8, mems[0] - 1)


def test_plan_train_cli(tmp_path):
    path = _calibration().save(tmp_path / "cal.json")
    args = ["plan", "train", "cosmoflow", "--ranks", "4", "--size", str(SIZE), "--width", str(WIDTH),
            "--calibration", str(path), "--json", str(tmp_path / "plan.json")]
    r = CliRunner().invoke(cli, args + ["--mem", "1GiB"])
    assert r.exit_code == 0, r.output
    assert "chosen: --data-parallel" in r.output
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert len(plan["predictions"]) == 10 and plan["chosen"] in [p["label"] for p in plan["predictions"]]
    r = CliRunner().invoke(cli, args + ["--mem", "1KiB"])
    assert r.exit_code == 2 and "no decomposition of 4 ranks fits 1.0 KiB" in r.output
    r = CliRunner().invoke(cli, ["plan", "train", "cosmoflow", "--ranks", "2",
                                 "--calibration", str(tmp_path / "missing.json")])
    assert r.exit_code == 2 and "tessera calibrate" in r.output
    r = CliRunner().invoke(cli, ["plan", "train", "unet3d", "--ranks", "2"])
    assert r.exit_code == 2


@pytest.mark.dist
def test_calibrate_quick(tmp_path):
    """The real microbenchmarks (quick mode: a few seconds, 2 gloo processes) give a
    calibration the planner takes."""
    out = tmp_path / "cal.json"
    r = CliRunner().invoke(cli, ["calibrate", "--quick", "--width", str(WIDTH), "--size", str(SIZE), "-o", str(out)])
    assert r.exit_code == 0, r.output
    cal = Calibration.load(out)
    assert set(cal.p2p) == {"2"} and set(cal.allreduce) == {"2"}
    assert cal.p2p["2"][0] > 0 or cal.p2p["2"][1] > 0
    conv = [v for k, v in cal.compute["1"].items() if k.startswith("conv3d/")]
    assert conv and all(t > 0 for pts in conv for _, t in pts)
    assert all(np.isfinite(v) for v in (cal.io["sample_alpha"], cal.io["target_alpha"]))
    spec = model_spec("cosmoflow", WIDTH, SIZE)
    plan = choose(cal, spec, 2, 4)
    assert plan.chosen.step_s > 0 and len(plan.predictions) == 4


def test_ties_go_to_the_outermost_split(spec):
    """A cube split 4 ways along D, H or W predicts alike; the D split is chosen."""
    cal = _calibration()
    preds = {str(g): predict(cal, spec, 1, g, 8) for g in (G(1, 1, 4), G(1, 4, 1), G(4, 1, 1))}
    assert len({round(p.step_s, 12) for p in preds.values()}) == 1
    assert fastest(list(preds.values())).grid == "4x1x1"
    assert fastest([preds["1x1x4"], preds["1x4x1"]]).grid == "1x4x1"

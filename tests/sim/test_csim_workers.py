"""Running a C-simulation on several worker processes (compiler/sim/csim.py): the same outputs
as one worker and as the exact reference, every sample reported to the progress callback, a
crash named by its sample's index in the whole run, and the workers kept between runs."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.compiler import api
from tessera.compiler.errors import SimulationError
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import sample_codes
from tessera.compiler.sim.csim import MIN_SAMPLES_PER_WORKER, MIN_SECONDS_PER_WORKER, CSim

pytestmark = pytest.mark.csim

MARK = "// hls-fpga-machine-learning insert layers"


@pytest.fixture
def mlp(tmp_path, make_qonnx_mlp):
    model = make_qonnx_mlp(tmp_path / "m.onnx")
    prj = api.compile_model(model, tmp_path / "prj", api.CompileOptions(tb_samples=8)).project
    graph = api.load_model(model)
    codes = sample_codes(graph.values[graph.input], 4 * MIN_SAMPLES_PER_WORKER, seed=3)
    return prj, codes, OrtReference(reference_model(graph)).run(codes)


def test_two_workers_equal_one_and_the_reference(mlp):
    prj, codes, ref = mlp
    seen = []
    two = CSim(prj, workers=2)
    got = two.run_codes(codes, progress=seen.append)
    assert len(two._procs) == 2 and sum(seen) == len(codes)
    pids = [p.proc.pid for p in two._procs]
    again = two.run_codes(codes)
    assert [p.proc.pid for p in two._procs] == pids  # kept between runs
    one = CSim(prj, workers=1).run_codes(codes)
    assert np.array_equal(got, ref) and np.array_equal(one, ref) and np.array_equal(again, ref)
    few = CSim(prj, workers=2)
    assert np.array_equal(few.run_codes(codes[:3]), ref[:3]) and len(few._procs) == 1  # too few samples for two
    assert few.sample_s is not None and few.sample_s > 0


def test_samples_that_took_long_last_time_get_more_workers(mlp):
    """A few samples whose last run took 2 MIN_SECONDS_PER_WORKER each (a 3D volume's) are
    spread over the workers; the outputs are the same."""
    prj, codes, ref = mlp
    sim = CSim(prj, workers=2)
    assert sim.workers_for(3) == 1  # nothing measured yet: one worker per MIN_SAMPLES_PER_WORKER
    sim.sample_s = 2 * MIN_SECONDS_PER_WORKER
    assert sim.workers_for(3) == 2 and sim.workers_for(1) == 1
    assert np.array_equal(sim.run_codes(codes[:3]), ref[:3]) and len(sim._procs) == 2
    sim.sample_s = MIN_SECONDS_PER_WORKER / 1000  # a light model: the count rule again
    assert sim.workers_for(3) == 1 and sim.workers_for(2 * MIN_SAMPLES_PER_WORKER) == 2
    sim.close()


def test_a_crash_in_the_second_worker_names_its_sample(mlp):
    """Sample 50 (in the second worker's half) aborts: the error names sample 50."""
    prj, codes, _ = mlp
    codes = codes.copy()
    lo = codes.min()
    codes[codes == lo] = lo + 1
    codes[50, 0] = lo  # the only sample whose first input is the type's minimum
    src = prj / "firmware" / "tessera_model.cpp"
    low = float(lo) * 2.0 ** -api.Manifest.read(prj).inputs[0].ftype.frac
    src.write_text("#include <cstdlib>\n" + src.read_text().replace(MARK, f"{MARK}\n    if (x_in[0] == {low!r}) abort();"))
    with pytest.raises(SimulationError, match=r"SIGABRT\) on sample 50\b"):
        CSim(prj, workers=2).run_codes(codes)

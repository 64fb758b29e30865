"""What every conformance test does with a case: build its model once per module, compile,
C-simulate and verify it (C-simulation == exact reference == the user's file run in float64
by the independent executor, on every output of every sample).

The verified cases run in each io type they apply to, split over two modules
(``test_conformance_parallel.py``, ``test_conformance_stream.py``) so that two test workers
share them.  In the default run each case runs in one io type, alternating along the case list
(every other case in io_parallel, the rest in io_stream: both io types run in every default
run); its other io type is marked ``slow`` (``pytest -m slow`` runs them;
``bench/conformance.py`` runs every case in both)."""

from __future__ import annotations

import pytest

from tessera.compiler.api import CompileOptions, VerifyOptions, compile_model, verify_project

from .catalog import CASES

def verified_params(io: str) -> list:
    """The cases that verify, in ``io``: the default run's half, then the ``slow`` half."""
    params = []
    for index, case in enumerate(CASES):
        if io not in case.io_types:
            continue
        default_io = case.io_types[index % len(case.io_types)]
        marks = [pytest.mark.csim] + ([] if io == default_io else [pytest.mark.slow])
        params.append(pytest.param(case, marks=marks, id=case.name))
    return params


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Each case's model file, built once per module."""
    folder, built = tmp_path_factory.mktemp("conformance"), {}

    def model(case):
        if case.name not in built:
            built[case.name] = case.model(folder)
        return built[case.name]

    return model


def assert_verifies(case, io: str, model, prj) -> None:
    result = compile_model(model, prj, CompileOptions(io_type=io, input_type=case.input_type, tb_samples=4))
    report = verify_project(model, result.project, VerifyOptions(samples=case.samples, user_samples=0,
                                                                 require_independent=True,
                                                                 oracle=case.oracle(model) if case.oracle else None))
    assert report.passed, report.verdict()
    assert report.mismatches == 0 and report.independent.differing_outputs == 0
    assert report.independent.equal == report.outputs, report.verdict()


__all__ = ["CASES", "assert_verifies", "models", "verified_params"]

"""The peers' models that verify, in io_stream (see :mod:`.check`: half of them in the default
run, the other half marked ``slow``)."""

from __future__ import annotations

import pytest

from .check import assert_verifies, models, verified_params  # noqa: F401 - models is a fixture


@pytest.mark.parametrize("case", verified_params("io_stream"))
def test_peer_model_verifies_in_io_stream(case, models, tmp_path):  # noqa: F811
    assert_verifies(case, "io_stream", models(case), tmp_path / "prj")

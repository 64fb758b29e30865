"""Model tests run torch on one thread: oversubscribed OpenMP spinning on a busy 2-core machine is slow."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)

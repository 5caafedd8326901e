import warnings

import numpy as np
import pytest
import torch

torch.set_default_dtype(torch.float64)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(autouse=True)
def _seed_torch():
    torch.manual_seed(0)
    with warnings.catch_warnings():
        yield

import numpy as np
import pytest

from dynbo.theory import dataset_utility, max_dataset_size


def bolt_example(n):
    return 0.05 + 2e-7 * n**3


@pytest.mark.parametrize("family,expected", [("matern32", 106), ("se", 115), ("matern12", 94)])
def test_bolt_worked_example(family, expected):
    # spec section 7.2: R(n) = 0.05 + 2e-7 n^3 s, l_T = 60 s
    assert max_dataset_size(bolt_example, family, 60.0) == expected
    for start in (1, 50, 300, 2000):
        assert max_dataset_size(bolt_example, family, 60.0, initial=start) == expected
    # agrees with an exhaustive search
    values = [dataset_utility(n, bolt_example, family, 60.0) for n in range(1, 600)]
    assert int(np.argmax(values)) + 1 == expected


def test_utility_definition():
    u = dataset_utility(3, lambda n: 2.0, "matern12", 4.0)
    assert u == pytest.approx(sum(np.exp(-2 * i * 2.0 / 4.0) for i in (1, 2, 3)))


def test_constant_response_time_hits_the_cap_and_fallback_is_used():
    assert max_dataset_size(lambda n: 0.1, "se", 60.0, n_max=500) == 500
    # an ascent that cannot finish within max_steps falls back to brute force
    assert (
        max_dataset_size(bolt_example, "matern32", 60.0, initial=2000, n_max=2000, max_steps=3)
        == 106
    )
    with pytest.raises(ValueError, match="lengthscale_time"):
        max_dataset_size(bolt_example, "se", 0.0)

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


def test_constant_response_time_hits_the_cap_in_few_evaluations():
    assert max_dataset_size(lambda n: 0.1, "se", 60.0, n_max=500) == 500
    # after max_steps single steps the search gallops and bisects: O(log n_max) more
    # utilities (a search of every size up to a cap of 10^6 took a million)
    sizes = []

    def counted(n):
        sizes.append(n)
        return 0.01

    assert max_dataset_size(counted, "se", 1e9, n_max=10**6) == 10**6
    # the 2000 single steps, then two sizes per probe (a forward difference) of the gallop
    assert len(set(sizes)) < 2_100
    for start in (1, 2000, 10**6):
        assert max_dataset_size(bolt_example, "matern32", 60.0, initial=start, n_max=10**6) == 106
        # galloping from the start at once finds the same maximum
        assert max_dataset_size(bolt_example, "matern32", 60.0, initial=start, max_steps=0) == 106
    with pytest.raises(ValueError, match="lengthscale_time"):
        max_dataset_size(bolt_example, "se", 0.0)

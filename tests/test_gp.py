import gpytorch
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dynbo.models import Hyperparameters, KernelSpec, SpatioTemporalGP
from dynbo.models.linalg import (
    CholeskyJitterWarning,
    NumericalError,
    cholesky_append,
    cholesky_delete,
    cholesky_inverse,
    cholesky_rank_one_update,
    robust_cholesky,
)

NU = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}


def make_data(n, d=2, seed=0, horizon=30.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, generator=g)
    t = torch.sort(torch.rand(n, generator=g) * horizon).values
    y = (
        torch.sin(6 * x[:, 0])
        + x[:, -1] ** 2
        + 0.3 * torch.cos(t / 5)
        + 0.05 * torch.randn(n, generator=g)
    )
    return torch.cat([x, t[:, None]], 1), y


def dense_reference(gp, z):
    """Posterior by a dense solve with numpy, independent of the cached factor."""
    X = gp.inputs.numpy()
    Kxx = gp.covariance(gp.inputs, gp.inputs).numpy() + np.diag(gp.noise_variances.numpy())
    Kzx = gp.covariance(z, gp.inputs).numpy()
    Kzz = gp.covariance(z, z).numpy()
    y = gp.standardized_targets.numpy()
    mean = Kzx @ np.linalg.solve(Kxx, y)
    cov = Kzz - Kzx @ np.linalg.solve(Kxx, Kzx.T)
    assert X.shape[0] == y.shape[0]
    return mean, np.diag(cov), cov


@pytest.mark.parametrize(
    "spatial,temporal", [("matern52", "matern32"), ("se", "se"), ("matern12", "matern52")]
)
@pytest.mark.parametrize("ard", [False, True])
def test_posterior_equals_dense_solve(spatial, temporal, ard):
    z, y = make_data(40)
    spec = KernelSpec(dim=2, spatial=spatial, temporal=temporal, ard=ard)
    h = Hyperparameters(
        outputscale=1.3,
        lengthscale_space=(0.3, 0.5) if ard else (0.4,),
        lengthscale_time=7.0,
        noise=0.02,
    )
    gp = SpatioTemporalGP(spec, h)
    gp.set_data(z, y)
    test, _ = make_data(25, seed=1)
    mean, var = gp.predict(test, standardized=True)
    ref_mean, ref_var, ref_cov = dense_reference(gp, test)
    np.testing.assert_allclose(mean.numpy(), ref_mean, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(var.numpy(), ref_var, rtol=1e-8, atol=1e-12)
    _, cov = gp.predict(test, standardized=True, full_covariance=True)
    np.testing.assert_allclose(cov.numpy(), ref_cov, rtol=1e-8, atol=1e-11)
    # original units are the affine image of standardized ones
    mean_o, var_o = gp.predict(test)
    np.testing.assert_allclose(
        mean_o.numpy(), ref_mean * gp.target_scale + gp.target_mean, rtol=1e-10
    )
    np.testing.assert_allclose(var_o.numpy(), ref_var * gp.target_scale**2, rtol=1e-8)
    assert gp.target_mean == pytest.approx(float(y.mean()))
    assert gp.target_scale == pytest.approx(float(y.std()))


class _GPyTorchReference(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood, kernel):
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.ZeroMean()
        self.covar_module = kernel

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


@pytest.mark.parametrize(
    "spatial,temporal", [("matern52", "matern32"), ("matern32", "matern12"), ("se", "se")]
)
def test_posterior_equals_gpytorch_exact_gp(spatial, temporal):
    z, y = make_data(50, d=3)
    lam, ls, lt, noise = 0.8, 0.45, 6.0, 0.03
    spec = KernelSpec(dim=3, spatial=spatial, temporal=temporal)
    gp = SpatioTemporalGP(spec, Hyperparameters(lam, (ls,), lt, noise))
    gp.set_data(z, y)

    def base(fam, dims):
        if fam == "se":
            return gpytorch.kernels.RBFKernel(active_dims=dims)
        return gpytorch.kernels.MaternKernel(nu=NU[fam], active_dims=dims)

    ks, kt = base(spatial, (0, 1, 2)), base(temporal, (3,))
    ks.lengthscale, kt.lengthscale = ls, lt
    kernel = gpytorch.kernels.ScaleKernel(gpytorch.kernels.ProductKernel(ks, kt))
    kernel.outputscale = lam
    likelihood = gpytorch.likelihoods.GaussianLikelihood(
        noise_constraint=gpytorch.constraints.GreaterThan(1e-8)
    )
    likelihood.noise = noise
    ref = _GPyTorchReference(z, gp.standardized_targets, likelihood, kernel).double()
    ref.eval()
    test, _ = make_data(30, d=3, seed=7)
    with (
        torch.no_grad(),
        gpytorch.settings.fast_computations(False, False, False),
        gpytorch.settings.fast_pred_var(False),
    ):
        pred = ref(test)
        ref_mean, ref_var = pred.mean, pred.variance
    mean, var = gp.predict(test, standardized=True)
    np.testing.assert_allclose(mean.numpy(), ref_mean.numpy(), rtol=1e-8, atol=1e-11)
    np.testing.assert_allclose(var.numpy(), ref_var.numpy(), rtol=1e-8, atol=1e-11)


def test_heteroscedastic_noise_matches_gpytorch_fixed_noise():
    z, y = make_data(30)
    spec = KernelSpec(dim=2, spatial="se", temporal=None)
    scale = torch.linspace(0.5, 4.0, 30)
    gp = SpatioTemporalGP(spec, Hyperparameters(1.0, (0.3,), None, 0.01))
    gp.set_data(z[:, :2], y, noise_scale=scale)
    ks = gpytorch.kernels.RBFKernel()
    ks.lengthscale = 0.3
    kernel = gpytorch.kernels.ScaleKernel(ks)
    kernel.outputscale = 1.0
    likelihood = gpytorch.likelihoods.FixedNoiseGaussianLikelihood(noise=0.01 * scale)
    ref = _GPyTorchReference(z[:, :2], gp.standardized_targets, likelihood, kernel).double()
    ref.eval()
    test = torch.rand(20, 2)
    with (
        torch.no_grad(),
        gpytorch.settings.fast_computations(False, False, False),
        gpytorch.settings.fast_pred_var(False),
    ):
        pred = ref(test)
    mean, var = gp.predict(test, standardized=True)
    np.testing.assert_allclose(mean.numpy(), pred.mean.numpy(), rtol=1e-8, atol=1e-11)
    np.testing.assert_allclose(var.numpy(), pred.variance.numpy(), rtol=1e-8, atol=1e-11)


def fresh_factor(gp):
    delta = gp.covariance(gp.inputs, gp.inputs) + torch.diag(gp.noise_variances)
    return torch.linalg.cholesky(delta + gp.jitter * torch.eye(gp.n))


@settings(max_examples=40, deadline=None)
@given(
    n0=st.integers(min_value=0, max_value=12),
    ops=st.lists(
        st.tuples(st.booleans(), st.integers(min_value=0, max_value=10**6)), min_size=1, max_size=25
    ),
)
def test_any_sequence_of_adds_and_removes_keeps_the_factor_exact(n0, ops):
    z, y = make_data(60, seed=3)
    spec = KernelSpec(dim=2, spatial="matern52", temporal="matern32")
    gp = SpatioTemporalGP(spec, Hyperparameters(1.0, (0.3,), 8.0, 0.01))
    gp.set_data(z[:n0], y[:n0])
    pool = n0
    for is_add, r in ops:
        if is_add or gp.n == 0:
            if pool >= 60:
                continue
            gp.add(z[pool], y[pool], noise_scale=1.0 + (r % 3))
            pool += 1
        else:
            gp.remove(r % gp.n)
    if gp.n:
        np.testing.assert_allclose(
            gp.cholesky_factor.numpy(), fresh_factor(gp).numpy(), rtol=0, atol=1e-10
        )
        alpha = torch.linalg.solve(fresh_factor(gp) @ fresh_factor(gp).T, gp.standardized_targets)
        np.testing.assert_allclose(gp.alpha.numpy(), alpha.numpy(), rtol=1e-8, atol=1e-9)


def test_add_and_remove_keep_standardization_and_match_refit():
    z, y = make_data(30)
    gp = SpatioTemporalGP(KernelSpec(dim=2), Hyperparameters(1.0, (0.3,), 8.0, 0.01))
    gp.set_data(z[:20], y[:20])
    mean0, scale0 = gp.target_mean, gp.target_scale
    for i in range(20, 30):
        gp.add(z[i], y[i])
    gp.remove(4)
    gp.remove(0)
    assert (gp.target_mean, gp.target_scale) == (mean0, scale0)
    test = torch.rand(10, 3)
    mean, var = gp.predict(test, standardized=True)
    ref_mean, ref_var, _ = dense_reference(gp, test)
    np.testing.assert_allclose(mean.numpy(), ref_mean, rtol=1e-8, atol=1e-11)
    np.testing.assert_allclose(var.numpy(), ref_var, rtol=1e-8, atol=1e-11)
    gp.restandardize()
    assert gp.target_mean == pytest.approx(float(gp.targets.mean()))


def test_a_reset_to_one_point_keeps_the_posterior_scale_in_original_units():
    # hyperparameters are in units of target_scale: a dataset too small to estimate a
    # scale (or a caller that keeps the hyperparameters) must not change that unit
    z, y = make_data(30)
    y = 1e4 * y
    gp = SpatioTemporalGP(KernelSpec(dim=2), Hyperparameters(1.0, (0.3,), 8.0, 0.01))
    gp.set_data(z, y)
    scale = gp.target_scale
    assert scale == pytest.approx(float(y.std()))
    far = torch.tensor([[0.99, 0.01, 1e4]])  # far from every observation in time
    _, prior_var = gp.predict(far)
    assert float(prior_var[0]) == pytest.approx(scale**2, rel=1e-6)  # lambda = 1
    gp.set_data(z[-1:], y[-1:])  # a reset to the newest point
    assert gp.target_scale == scale and gp.target_mean == float(y[-1])
    mean, var = gp.predict(far)
    assert float(var[0]) == pytest.approx(scale**2, rel=1e-6)  # was 1 in the old units
    gp.set_data(z[:0], y[:0])  # empty: the units stay
    assert gp.target_scale == scale
    gp.add(z[0], y[0])
    assert gp.target_scale == scale and gp.target_mean == float(y[0])
    # two points with keep_scale: the mean follows, the unit stays
    gp.set_data(z[:2], y[:2], keep_scale=True)
    assert gp.target_scale == scale and gp.target_mean == pytest.approx(float(y[:2].mean()))
    gp.restandardize(keep_scale=True)
    assert gp.target_scale == scale
    gp.restandardize()  # free to re-estimate from two points
    assert gp.target_scale == pytest.approx(float(y[:2].std()))


def test_rank_one_update_and_delete_against_fresh_factorization():
    g = torch.Generator().manual_seed(5)
    a = torch.randn(50, 50, generator=g)
    m = a @ a.T / 50 + 0.1 * torch.eye(50)
    l = torch.linalg.cholesky(m)
    v = torch.randn(50, generator=g)
    np.testing.assert_allclose(
        cholesky_rank_one_update(l, v).numpy(),
        torch.linalg.cholesky(m + torch.outer(v, v)).numpy(),
        atol=1e-12,
    )
    for i in [0, 17, 49]:
        keep = [j for j in range(50) if j != i]
        np.testing.assert_allclose(
            cholesky_delete(l, i).numpy(),
            torch.linalg.cholesky(m[keep][:, keep]).numpy(),
            atol=1e-12,
        )
    big = cholesky_append(l[:49, :49], m[:49, 49], m[49, 49])
    np.testing.assert_allclose(big.numpy(), l.numpy(), atol=1e-12)
    with pytest.raises(IndexError):
        cholesky_delete(l, 50)


def test_robust_cholesky_adds_jitter_with_warning_and_refuses_garbage():
    x = torch.rand(5, 1)
    m = torch.exp(-((x - x.T) ** 2))
    m = torch.cat(
        [torch.cat([m, m[:, :1]], 1), torch.cat([m[:1], m[:1, :1]], 1)]
    )  # duplicated row: singular
    m[-1, -1] -= 1e-9  # indefinite
    with pytest.warns(CholeskyJitterWarning, match="jitter"):
        factor, jitter = robust_cholesky(m)
    assert jitter > 0
    np.testing.assert_allclose(
        (factor @ factor.T).numpy(), (m + jitter * torch.eye(6)).numpy(), atol=1e-12
    )
    bad = torch.eye(3)
    bad[0, 0] = float("nan")
    with pytest.raises(NumericalError, match="NaN"):
        robust_cholesky(bad)
    with pytest.raises(NumericalError, match="failed"):
        robust_cholesky(-torch.eye(3))


def test_duplicate_point_without_noise_refactorizes_with_warning():
    gp = SpatioTemporalGP(KernelSpec(dim=1, temporal=None), Hyperparameters(1.0, (0.3,), None, 0.0))
    gp.set_data(torch.tensor([[0.1], [0.5]]), torch.tensor([1.0, 2.0]))
    with pytest.warns(CholeskyJitterWarning):
        gp.add(torch.tensor([0.5]), 2.0)
    assert gp.jitter > 0
    np.testing.assert_allclose(gp.cholesky_factor.numpy(), fresh_factor(gp).numpy(), atol=1e-12)


def test_prior_when_empty_and_bad_inputs():
    gp = SpatioTemporalGP(KernelSpec(dim=2), Hyperparameters(2.0, (0.3,), 1.0, 0.1))
    mean, var = gp.predict(torch.rand(4, 3))
    assert torch.all(mean == 0) and torch.allclose(var, torch.full((4,), 2.0))
    with pytest.raises(ValueError, match="shape"):
        gp.add(torch.rand(2), 1.0)
    with pytest.raises(ValueError, match="NaN"):
        gp.add(torch.tensor([0.1, float("nan"), 0.0]), 1.0)
    with pytest.raises(IndexError):
        gp.remove(0)
    assert gp.n == 0


def test_state_dict_round_trip_is_bit_exact():
    z, y = make_data(20)
    gp = SpatioTemporalGP(KernelSpec(dim=2), Hyperparameters(1.0, (0.3,), 8.0, 0.01))
    gp.set_data(z[:10], y[:10])
    for i in range(10, 20):
        gp.add(z[i], y[i])
    gp.remove(3)
    other = SpatioTemporalGP(KernelSpec(dim=2))
    other.load_state_dict(gp.state_dict())
    test = torch.rand(5, 3)
    assert torch.equal(other.predict(test)[0], gp.predict(test)[0])
    assert torch.equal(other.cholesky_factor, gp.cholesky_factor)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_cholesky_inverse_is_the_row_major_inverse(dtype):
    g = torch.Generator().manual_seed(4)
    a = torch.rand(30, 30, generator=g, dtype=torch.float64)
    matrix = (a @ a.T + 30 * torch.eye(30, dtype=torch.float64)).to(dtype)
    inverse = cholesky_inverse(torch.linalg.cholesky(matrix))
    assert inverse.is_contiguous() and inverse.dtype == dtype
    tolerance = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(inverse @ matrix, torch.eye(30, dtype=dtype), rtol=0, atol=tolerance)
    assert torch.equal(inverse, inverse.T)  # a CPU's LAPACK: exactly symmetric

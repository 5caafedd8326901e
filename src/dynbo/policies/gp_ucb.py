"""GP-UCB that keeps every observation: the static baseline and its spatio-temporal twin.

* :class:`GPUCB` (``"gp-ucb"``): Srinivas et al. (2010) with a spatial kernel only; the
  control solution of the W-DBO and BOLT comparisons (Bardou, Thiran & Ranieri 2024,
  Sec. 5; Bardou & Thiran 2025, Sec. 5).
  It treats the objective as static, so old observations are as trusted as new ones.
* :class:`SpatioTemporalGPUCB` (``"st-gp-ucb"``): the W-DBO / BOLT surrogate
  (``lambda k_S k_T``, online hyperparameters, GP-UCB at the present time) with no
  removal at all, so that the effect of forgetting can be seen on its own.
"""

from __future__ import annotations

from dynbo.policies.base import Policy, register

__all__ = ["GPUCB", "SpatioTemporalGPUCB"]


@register
class GPUCB(Policy):
    """GP-UCB on a spatial GP that keeps all data.

    See :class:`~dynbo.policies.base.Policy` for the shared arguments. The acquisition is
    ``mu + sqrt(beta) sigma`` with ``beta = 0.2 d log(2 n)`` by default.
    """

    name = "gp-ucb"
    reference = (
        "Srinivas, Krause, Kakade & Seeger (2010), Gaussian Process Optimization in the "
        "Bandit Setting"
    )
    models_time = False


@register
class SpatioTemporalGPUCB(Policy):
    """GP-UCB at the present time on the spatio-temporal GP ``lambda k_S k_T``, keeping all data.

    This is W-DBO / BOLT without their removal step (the same model, fit and acquisition).
    """

    name = "st-gp-ucb"
    reference = "Bardou, Thiran & Ranieri (2024), W-DBO Algorithm 1 without its removals"
    models_time = True

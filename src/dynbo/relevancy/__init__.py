"""The Wasserstein relevancy criterion of W-DBO and BOLT (exact, all n values in O(n^3)).

* :mod:`dynbo.relevancy.convolutions`: closed-form kernel self-convolutions (W-DBO
  Tables 3 and 4, with the temporal-SE erratum fixed and a ``paper_compat`` switch);
* :mod:`dynbo.relevancy.criterion`: the matrix ``C``, the criteria ``R_i = W_i / W_D``
  (eq. 12) and :class:`WassersteinRelevancy` with O(n^2) updates after each removal;
* :mod:`dynbo.relevancy.reference`: the naive per-observation Theorem 4.1 (tests only).

See ``docs/relevancy.md`` for the formulas and their derivation.
"""

from dynbo.relevancy.convolutions import (
    PAPER_NOISE_FLOOR,
    spatial_convolution_matrix,
    spatial_self_convolution,
    temporal_convolution_matrix,
    temporal_self_convolution,
    unit_spatial_self_convolution,
)
from dynbo.relevancy.criterion import (
    WassersteinRelevancy,
    convolution_matrix,
    wasserstein_relevancies,
    wasserstein_terms,
)

__all__ = [
    "PAPER_NOISE_FLOOR",
    "WassersteinRelevancy",
    "convolution_matrix",
    "spatial_convolution_matrix",
    "spatial_self_convolution",
    "temporal_convolution_matrix",
    "temporal_self_convolution",
    "unit_spatial_self_convolution",
    "wasserstein_relevancies",
    "wasserstein_terms",
]

"""TVBO policies behind one ask/tell API (see :class:`dynbo.policies.Policy`).

``make(name, **config)`` builds a policy by its registered name; ``available()`` lists
the names.
"""

from dynbo.policies.base import (
    Dataset,
    Diagnostics,
    Policy,
    Query,
    available,
    make,
    option_defaults,
    policy_class,
    register,
)
from dynbo.policies.bolt import BOLT
from dynbo.policies.gp_ucb import GPUCB, SpatioTemporalGPUCB
from dynbo.policies.wdbo import WDBO

__all__ = [
    "BOLT",
    "GPUCB",
    "WDBO",
    "Dataset",
    "Diagnostics",
    "Policy",
    "Query",
    "SpatioTemporalGPUCB",
    "available",
    "make",
    "option_defaults",
    "policy_class",
    "register",
]

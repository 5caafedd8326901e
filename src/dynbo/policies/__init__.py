"""TVBO policies behind one ask/tell API (see :class:`dynbo.policies.Policy`).

``make(name, **config)`` builds a policy by its registered name; ``available()`` lists
the names.
"""

from dynbo.policies.abo import ABO
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
from dynbo.policies.options import PolicyOptions
from dynbo.policies.resetting import ETGPUCB, RGPUCB
from dynbo.policies.sparq import SparQGPUCB, WSparQGPUCB
from dynbo.policies.tv_gp_ucb import TVGPUCB
from dynbo.policies.ui_tvbo import UITVBO
from dynbo.policies.wdbo import WDBO
from dynbo.policies.window import BRGPUCB, SWGPUCB, WGPUCB

__all__ = [
    "ABO",
    "BOLT",
    "BRGPUCB",
    "ETGPUCB",
    "GPUCB",
    "RGPUCB",
    "SWGPUCB",
    "SparQGPUCB",
    "TVGPUCB",
    "UITVBO",
    "WDBO",
    "WGPUCB",
    "WSparQGPUCB",
    "Dataset",
    "Diagnostics",
    "Policy",
    "PolicyOptions",
    "Query",
    "SpatioTemporalGPUCB",
    "available",
    "make",
    "option_defaults",
    "policy_class",
    "register",
]

"""dynbo: time-varying Bayesian optimization.

Policies (``dynbo.policies``) share one ask/tell API::

    policy = dynbo.policies.make("wdbo", bounds=[[0, 0], [1, 1]], seed=0)
    query = policy.suggest(t)          # where (query.x) and when (query.t) to evaluate
    policy.observe(query.x, query.t, y)

Benchmarks live in ``dynbo.benchmarks``, the run loop, clocks, store and campaigns in
``dynbo.harness``, tables and figures in ``dynbo.report``.
"""

__version__ = "0.1.0"

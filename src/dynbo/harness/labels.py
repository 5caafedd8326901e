"""Names the harness, the store and the reports share, in a module that imports nothing.

The table rows a benchmark's label may not take (the tables' own score rows) and the
reference players' names are read by the campaign builder and by the reports; keeping
them here lets a command that only reads a store (``dynbo show``) load the report
tables without the run loop, torch or the policies.
"""

__all__ = ["OVERALL_ROW", "REFERENCE_PLAYERS", "RESERVED_ROWS", "SCORE_ROW"]

#: the row of the campaign tables that scores every policy over the benchmarks
#: (``dynbo.report.tables.OVERALL``): no benchmark may head a row so
OVERALL_ROW = "OVERALL"

#: the row of the normalized score between the reference players (``dynbo.report.tables.SCORE``)
SCORE_ROW = "SCORE"

#: every row label the tables reserve
RESERVED_ROWS = (OVERALL_ROW, SCORE_ROW)

#: the reference players of :mod:`dynbo.harness.references`, in table order
REFERENCE_PLAYERS = ("random", "oracle-lag")

"""The ``dynbo`` commands, one module each.

A command module defines ``NAME`` (the word after ``dynbo``), ``SUMMARY`` (its line in
``dynbo --help``), ``DESCRIPTION`` (the top of ``dynbo NAME --help``),
``add_arguments(parser)`` and ``run(args) -> int`` (the exit status). It imports only the
standard library and :mod:`dynbo.cli.common` at module level, and what its command needs
inside ``run``: building the parser imports every command module, so that ``--help``
stays fast.

Adding a command is a new module here plus its line in :data:`COMMANDS`.
"""

#: the command modules, in the order ``dynbo --help`` lists them
COMMANDS = (
    "run",
    "bench",
    "tune",
    "listing",  # dynbo list
    "calibrate",
    "export",
    "report",
    "show",
    "theory",
    "reproduce",
    "data",
    "serve",
)

"""``python -m dynbo``: the ``dynbo`` command."""

import sys

from dynbo.cli import main

if __name__ == "__main__":
    sys.exit(main())

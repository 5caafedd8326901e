"""``python -m dynbo``: the ``dynbo`` command."""

from dynbo.cli import console_main

if __name__ == "__main__":
    console_main()

"""``python -m dynbo.cli``: the ``dynbo`` command."""

from dynbo.cli.app import console_main

if __name__ == "__main__":
    console_main()

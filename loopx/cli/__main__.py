"""``python -m loopx.cli``: the same as the ``loopx`` command."""

from loopx.cli import main

main()

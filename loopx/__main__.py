"""``python -m loopx``."""

from loopx.cli import main

main()

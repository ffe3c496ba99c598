"""loopx: many independent research agents, one typed, append-only, hash-chained evidence log."""

__version__ = "0.1.0"

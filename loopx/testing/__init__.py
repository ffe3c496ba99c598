"""Test support shipped with loopx: the store conformance suite a new backend must pass."""

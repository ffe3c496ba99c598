"""The conformance suite, run over every backend (see conftest.backend)."""

from loopx.testing.store_conformance import *  # noqa: F403

"""The temp directory a benchmark runs in: its --dir and --keep options, made and removed."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def add_temp_root_options(ap: argparse.ArgumentParser) -> None:
    """``--dir`` (the temp directory's parent) and ``--keep`` (do not remove it)."""
    ap.add_argument("--dir", default=None, help="parent for the temp directory (default: TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory")


@contextmanager
def temp_root(prefix: str, args: argparse.Namespace) -> Iterator[Path]:
    """A new temp directory under ``args.dir``, removed afterwards unless ``args.keep``."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=args.dir))
    try:
        yield root
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

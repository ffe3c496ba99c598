"""The demo's learning problem: scikit-learn's bundled handwritten digits (no download), split
once into train, dev and held-out sets by a seed, and models named by a family and parameters.

The project the executors work on is a small git repository: ``model.py`` (editable: builds a
model from an experiment's parameters) and ``eval/score.py`` (protected: the accuracy the
campaign is measured with). Seeds vary the training subsample, so repeated runs differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

DATASET = "digits"
TRAIN_FRACTION = 0.6
DEV_FRACTION = 0.2
SUBSAMPLE = 0.5  # each seed trains on its own half of the training split

MODEL_PY = '''"""Builds a classifier from an experiment's family and parameters (editable scope)."""


def build(family, params, seed):
    if family == "linear":
        from sklearn.linear_model import LogisticRegression
        return LogisticRegression(C=params.get("C", 1.0), max_iter=1000)
    if family == "kernel":
        from sklearn.svm import SVC
        return SVC(gamma=params.get("gamma", 0.05), C=params.get("C", 1.0))
    if family == "neighbours":
        from sklearn.neighbors import KNeighborsClassifier
        return KNeighborsClassifier(n_neighbors=params.get("k", 3))
    if family == "naive_bayes":
        from sklearn.naive_bayes import GaussianNB
        return GaussianNB()
    raise ValueError(f"unknown model family {family!r}")
'''

SCORE_PY = '''"""The campaign's metric (protected scope: executors must not change it)."""


def score(labels, predictions):
    return float((labels == predictions).mean())
'''


def project_files() -> dict[str, str]:
    """The demo project's files, by path."""
    return {"model.py": MODEL_PY, "eval/score.py": SCORE_PY, "experiment.json": "{}\n",
            ".gitignore": "public/\n__pycache__/\n"}


def location(split: str, seed: int) -> str:
    """Where a split's data is: a pointer the claim packet hands to the todo that reads it."""
    return f"sklearn:{DATASET}?seed={seed}#{split}"


def load_split(where: str) -> tuple[Any, Any, Any, Any]:
    """(train X, train y, X, y) of the split a location names."""
    import numpy as np
    from sklearn.datasets import load_digits

    head, _, split = where.partition("#")
    seed = int(head.rsplit("seed=", 1)[1])
    x, y = load_digits(return_X_y=True)
    x = x / 16.0
    order = np.random.default_rng(seed).permutation(len(y))
    a, b = int(TRAIN_FRACTION * len(y)), int((TRAIN_FRACTION + DEV_FRACTION) * len(y))
    parts = {"train": order[:a], "dev": order[a:b], "heldout": order[b:]}
    if split not in ("dev", "heldout"):
        raise ValueError(f"unknown split {split!r}")
    return x[parts["train"]], y[parts["train"]], x[parts[split]], y[parts[split]]


def preload() -> None:
    """Import what training and scoring use, once, before a serving command's first task."""
    import importlib

    for name in ("numpy", "sklearn.datasets", "sklearn.linear_model", "sklearn.naive_bayes",
                 "sklearn.neighbors", "sklearn.svm"):
        importlib.import_module(name)


def evaluate(project: Path, family: str, params: dict[str, Any], where: str,
             seeds: list[int]) -> list[float]:
    """The metric on the split at ``where``, one value per seed, using the project's own
    ``model.py`` and ``eval/score.py`` (so a change to either is what gets evaluated)."""
    import runpy

    import numpy as np

    build = runpy.run_path(str(project / "model.py"))["build"]
    score = runpy.run_path(str(project / "eval" / "score.py"))["score"]
    train_x, train_y, x, y = load_split(where)
    values = []
    for seed in seeds:
        rows = np.random.default_rng(1000 + seed).choice(
            len(train_y), size=int(SUBSAMPLE * len(train_y)), replace=False)
        model = build(family, params, seed)
        model.fit(train_x[rows], train_y[rows])
        values.append(round(float(score(y, model.predict(x))), 6))
    return values

"""The demo evaluator's re-run command for the reproduced gate: ``python -m loopx.demo.rerun``.

``loopx gate reproduce`` runs it in a fresh checkout of a held-out packet's evaluated commit
with the request on stdin; it evaluates the experiment that commit holds (``experiment.json``,
the project's own ``model.py`` and protected ``eval/score.py``) on the split the request names,
over its seeds, and prints the values.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from loopx.demo.problem import evaluate


def main() -> int:
    """Read the request on stdin, print ``{"results": [{"seed", "value"}, ...]}``."""
    request = json.load(sys.stdin)
    project = Path.cwd()
    experiment = json.loads((project / "experiment.json").read_text())
    seeds = list(request["seeds"])
    values = evaluate(project, experiment["family"], experiment["parameters"],
                      request["location"], seeds)
    print(json.dumps({"results": [{"seed": seed, "value": value}
                                  for seed, value in zip(seeds, values, strict=True)]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

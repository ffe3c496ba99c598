"""The built wheel carries lanes/ and schemas/ and works from a fresh virtual environment."""

from __future__ import annotations

import json
import shutil
import site
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                              ".loopx", ".hypothesis", ".pytest_cache")


def test_wheel_installs_and_runs_init_and_verify(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=SKIP)
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(dist), str(src)], check=True, capture_output=True)
    [wheel] = dist.glob("loopx-*.whl")

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", str(wheel)], check=True, capture_output=True)
    # Dependencies come from this test environment; the source tree itself is not importable.
    fresh_site = Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    deps = [p for p in {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
            if Path(p).is_dir()]
    (fresh_site / "test-deps.pth").write_text("\n".join(deps) + "\n")

    where = subprocess.run(
        [python, "-c", "import loopx, importlib.resources as r; print(loopx.__file__); "
                       "print(sorted(p.name for p in r.files('loopx.schemas').iterdir() "
                       "if p.name.endswith('.json')))"],
        cwd=tmp_path, check=True, capture_output=True, text=True).stdout.splitlines()
    assert where[0].startswith(str(fresh_site)), where[0]
    assert "research_contract_v0.schema.json" in where[1]

    loopx = env_dir / "bin" / "loopx"
    project = tmp_path / "project"
    project.mkdir()
    init = subprocess.run([loopx, "init", "--goal-id", "wheel", "--json"], cwd=project,
                          capture_output=True, text=True)
    assert init.returncode == 0, init.stderr
    assert json.loads(init.stdout)["owner_token"].startswith("lpx_")
    assert len(list((project / ".loopx" / "lanes").glob("*.toml"))) == 5
    check = subprocess.run([loopx, "verify", "--json"], cwd=project, capture_output=True,
                           text=True)
    assert check.returncode == 0 and json.loads(check.stdout)["ok"] is True

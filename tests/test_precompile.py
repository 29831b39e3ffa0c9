"""psvm.precompile, which setup.py runs while pip installs psvm: after it, the README's main
job compiles nothing, under ``mpiexec -n 2`` as users run it (no thread settings)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._helpers import mpiexec
from tests.conftest import REPO

# compiled functions Python calls that precompiling does not reach (rare paths: a kernel
# matrix outside training, SGD's validation count, the cache's plain look-up)
NOT_PRECOMPILED = {"kernels._matrix_pre", "sgd.steps.count_correct", "svc.cache.get"}

COVERAGE = """
import importlib, pkgutil, psvm
from psvm.jit import Dispatcher, InnerDispatcher, _in_disk_cache
for m in pkgutil.walk_packages(psvm.__path__, "psvm."):
    if m.name.endswith("__main__"):
        continue
    for name, f in vars(importlib.import_module(m.name)).items():
        if not isinstance(f, Dispatcher) or f.py_func.__module__ != m.name:
            continue
        inlined = f.targetoptions.get("inline") == "always" or isinstance(f, InnerDispatcher)
        if not inlined and not _in_disk_cache(f):  # an inner one is cached where it is called
            print(m.name.removeprefix("psvm.") + "." + name)
"""


def _cache_files(root: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in root.rglob("*.nb[ic]")}


def test_after_precompiling_the_readme_job_compiles_nothing(tmp_path):
    cache = tmp_path / "cache"
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": str(cache),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    env.pop("NUMBA_NUM_THREADS", None)

    def run(*cmd: str) -> subprocess.CompletedProcess:
        r = subprocess.run(
            cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900, check=False
        )
        assert r.returncode == 0, r.stderr[-3000:]
        return r

    assert "compiled in" in run(sys.executable, "-m", "psvm.precompile").stderr
    before = _cache_files(cache)
    assert len(before) > 100
    data, model = REPO / "data" / "breast_cancer", str(tmp_path / "m.model")
    launch = [mpiexec(), "-n", "2", sys.executable, "-m"]
    run(*launch, "psvm.cli.train", "-c", "1", "-g", "0.05", f"{data}.train", model)
    out = run(*launch, "psvm.cli.predict", f"{data}.test", model, str(tmp_path / "p"))
    assert "Accuracy = 96.4497% (163/169)" in out.stdout
    assert _cache_files(cache) == before  # numba wrote nothing: it compiled nothing
    missing = set(run(sys.executable, "-c", COVERAGE).stdout.split())
    assert missing == NOT_PRECOMPILED


def test_the_build_has_the_dependencies_it_compiles_with():
    """setup.py runs psvm-train in pip's build environment: it needs psvm's dependencies
    but scikit-learn and joblib (the estimators'), with the same lower bounds."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    runtime = meta["project"]["dependencies"]
    needed = [d for d in runtime if not d.startswith(("scikit-learn", "joblib"))]
    assert sorted(meta["build-system"]["requires"]) == sorted(["setuptools>=68", *needed])

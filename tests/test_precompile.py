"""psvm.precompile, which setup.py runs while pip installs psvm: after it, the README's main
job compiles nothing, under ``mpiexec -n 2`` as users run it (no thread settings), also where
the cache was copied to with new file times (a wheel). On a fresh install (CI) the test takes
the cache the install compiled, as the session found it; elsewhere it compiles its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from importlib.util import cache_from_source
from pathlib import Path

import pytest

from psvm.precompile import MANIFEST, ROOT, manifest
from tests._helpers import mpiexec
from tests.conftest import REPO

# compiled functions Python calls that precompiling does not reach (rare paths: a kernel
# matrix outside training, SGD's validation count, the cache's plain look-up)
NOT_PRECOMPILED = {"kernels.matrix._matrix_pre", "sgd.steps.count_correct", "svc.cache.get"}

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


def test_a_precompiled_cache_moved_elsewhere_serves_the_readme_job(tmp_path, precompiled_cache):
    """As a wheel: compiled next to the modules in one place, then copied with new file times
    to another (pip's install), the cache serves the README's job there, which compiles
    nothing (numba writes nothing)."""
    skip = shutil.ignore_patterns("__pycache__")
    built, installed = tmp_path / "built" / "psvm", tmp_path / "installed" / "psvm"
    shutil.copytree(REPO / "psvm", built, ignore=skip)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "NUMBA_NUM_THREADS")}

    def run(where: str, *cmd: str) -> subprocess.CompletedProcess:
        env["PYTHONPATH"] = str(tmp_path / where)
        r = subprocess.run(
            cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900, check=False
        )
        assert r.returncode == 0, r.stderr[-3000:]
        return r

    if precompiled_cache is None:  # the tree's cache holds what tests or earlier runs compiled
        assert "compiled in" in run("built", sys.executable, "-m", "psvm.precompile").stderr
        written = json.loads((built / MANIFEST.relative_to(ROOT)).read_text())
        assert written == manifest(built)  # what a fresh install leaves for the other path
    else:  # the install's, from an empty cache: precompile's output and nothing else
        shutil.copytree(precompiled_cache, built, dirs_exist_ok=True)
    # and the modules' bytecode, which no rank then compiles at its start
    sources = (built if precompiled_cache is None else REPO / "psvm").rglob("*.py")
    assert not [p for p in sources if not os.path.exists(cache_from_source(str(p)))]
    time.sleep(0.01)  # new times for the copies
    shutil.copytree(built, installed, copy_function=shutil.copy)
    before = _cache_files(installed)
    assert len(before) > 100
    data, model = REPO / "data" / "breast_cancer", str(tmp_path / "m.model")
    launch = [mpiexec(), "-n", "2", sys.executable, "-m"]
    run("installed", *launch, "psvm.cli.train", "-c", "1", "-g", "0.05", f"{data}.train", model)
    out = run("installed", *launch, "psvm.cli.predict", f"{data}.test", model, str(tmp_path / "p"))
    assert "Accuracy = 96.4497% (163/169)" in out.stdout
    assert _cache_files(installed) == before  # numba wrote nothing: it compiled nothing
    missing = set(run("installed", sys.executable, "-c", COVERAGE).stdout.split())
    assert missing == NOT_PRECOMPILED


def test_the_build_has_the_dependencies_it_compiles_with():
    """setup.py runs psvm-train in pip's build environment: it needs psvm's dependencies
    but scikit-learn and joblib (the estimators'), with the same lower bounds."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    runtime = meta["project"]["dependencies"]
    needed = [d for d in runtime if not d.startswith(("scikit-learn", "joblib"))]
    assert sorted(meta["build-system"]["requires"]) == sorted(["setuptools>=68", *needed])

"""Reference checks shared by the solver tests: dual objectives and model agreement."""

from __future__ import annotations

import lzma

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file
from sklearn.metrics.pairwise import pairwise_kernels


def load_head(path, n_rows: int | None = None, n_features: int | None = None):
    """The first ``n_rows`` rows of a (compressed) LIBSVM file from shared/data."""
    opener = lzma.open if str(path).endswith(".xz") else open
    with opener(path, "rb") as f:
        lines = f.readlines() if n_rows is None else [f.readline() for _ in range(n_rows)]
    import io

    X, y = load_svmlight_file(io.BytesIO(b"".join(lines)), n_features=n_features, zero_based=False)
    # sklearn.svm.SVC accepts 32-bit indices only
    X = sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), X.shape)
    return X, y


def write_head(src, dst, n_rows: int | None = None) -> str:
    """Decompress the first ``n_rows`` lines of ``src`` to ``dst``."""
    opener = lzma.open if str(src).endswith(".xz") else open
    with opener(src, "rb") as f, open(dst, "wb") as out:
        for k, line in enumerate(f):
            if n_rows is not None and k >= n_rows:
                break
            out.write(line)
    return str(dst)


def libsvm_problem(src, dst, n_rows: int | None = None):
    """(y, X) of the first ``n_rows`` lines of ``src`` (decompressed to ``dst``), read by LIBSVM."""
    from libsvm import svmutil

    y, X = svmutil.svm_read_problem(write_head(src, dst, n_rows), return_scipy=True)
    return np.asarray(y), sp.csr_matrix(X)


def pair_objectives(dual_coef, SV, n_support, kernel, gamma, coef0=0.0, degree=3):
    """Dual objective 1/2 c'Kc - sum|c| of every one-vs-one pair (LIBSVM layout)."""
    dual_coef = np.asarray(dual_coef.todense() if hasattr(dual_coef, "todense") else dual_coef)
    K = pairwise_kernels(
        SV, SV, metric=kernel, gamma=gamma, coef0=coef0, degree=degree, filter_params=True
    )
    start = np.concatenate(([0], np.cumsum(n_support)))
    k = len(n_support)
    out = []
    for a in range(k):
        for b in range(a + 1, k):
            ia = np.arange(start[a], start[a + 1])
            ib = np.arange(start[b], start[b + 1])
            idx = np.concatenate((ia, ib))
            c = np.concatenate((dual_coef[b - 1, ia], dual_coef[a, ib]))
            out.append(0.5 * c @ K[np.ix_(idx, idx)] @ c - np.abs(c).sum())
    return np.array(out)


def run_cli(module: str, args: list, n: int | None, timeout: float = 300, cwd=None):
    """Run ``python -m module args``, under ``mpiexec -n n`` unless n is None.

    A ``module`` ending in ``.py`` is a script of the repository (``benchmarks/...``), run by
    path with the repository first on ``PYTHONPATH``, so it imports this checkout's psvm.
    """
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests._helpers import mpiexec

    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    if module.endswith(".py"):
        repo = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, env.get("PYTHONPATH")]))
        cmd = [sys.executable, os.path.join(repo, module), *map(str, args)]
    else:
        cmd = [sys.executable, "-m", module, *map(str, args)]
    if n is not None:
        exe = mpiexec()
        assert exe is not None, "mpiexec not found: install the mpich wheel"
        cmd = [exe, "-n", str(n), *cmd]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env, check=False
    )


def launch_cli_batch(
    folder, n: int, runs: list[list], timeout: float = 600, env: dict | None = None
) -> list[dict]:
    """``runs`` (each ``["train" or "predict", *args]``) in order, in one ``mpiexec -n n``
    launch (``tests/mpi/run_cli_batch.py``): a launch costs each rank its imports, about 2 s
    on two cores. Each run's result: every rank's return code and rank 0's stderr."""
    import json

    from tests._helpers import run_mpi

    argv = folder / f"argv-{n}.json"
    argv.write_text(json.dumps([[str(a) for a in run] for run in runs]))
    out = folder / f"results-{n}.json"
    r = run_mpi("run_cli_batch.py", [out, argv], n, timeout=timeout, env=env)
    assert r.returncode == 0 and out.exists(), r.stderr[-3000:]
    results = json.loads(out.read_text())
    assert len(results) == len(runs)
    return results


def run_cli_batch(folder, n: int, runs: list[list]) -> list[dict]:
    """:func:`launch_cli_batch`, which fails unless every run returns 0 on every rank."""
    results = launch_cli_batch(folder, n, runs)
    for res in results:
        assert res["codes"] == [0] * n, res
    return results


def assert_models_equal(a, b, rtol: float = 1e-9) -> None:
    """Two SVCModels are the same classifier: same SVs, coefficients and rho."""
    assert list(a.classes) == list(b.classes)
    assert list(a.n_support) == list(b.n_support)
    assert (a.support_vectors != b.support_vectors).nnz == 0
    np.testing.assert_allclose(a.dual_coef, b.dual_coef, rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(a.rho, b.rho, rtol=rtol, atol=1e-12)


def fit_model(X, y, comm=None, **params):
    """Train psvm's one-vs-one C-SVC on (X, y) in this process; returns (model, stats)."""
    from psvm._params import validate_svc_params
    from psvm.comm import Comm
    from psvm.io.shard import Shard
    from psvm.stats import Stats
    from psvm.svc.multiclass import fit_ovo

    X = sp.csr_matrix(X, dtype=np.float64)
    shard = Shard(
        X=X,
        y=np.asarray(y, dtype=np.float64),
        offset=0,
        n_samples=X.shape[0],
        n_features=X.shape[1],
        max_row_nnz=int(np.diff(X.indptr).max()),
    )
    stats = Stats()
    model, _ = fit_ovo(
        comm or Comm(), shard, validate_svc_params(**params), np.unique(y), stats=stats
    )
    return model, stats

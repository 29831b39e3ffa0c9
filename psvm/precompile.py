"""Compile psvm's numba code ahead of its first use: ``python -m psvm.precompile``.

pip runs this while it installs psvm (``setup.py``), so that the first psvm-train after
installing loads compiled code from numba's disk cache instead of compiling it for 10-25 s.
It trains and predicts small synthetic problems of every kind, in two processes (one rank
each): each compiled function is typed on the same argument types as a user's run, and the
compiled code does not depend on the number of ranks, so the cache serves ``mpiexec -n P`` too.
Run it again after a numba upgrade, or as each user when numba cannot write next to psvm's
modules (it then caches under the user's home, or where ``NUMBA_CACHE_DIR`` says). It also
writes the modules' bytecode where it can.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

__all__ = ["MANIFEST", "PARTS", "cache_digests", "main", "manifest", "precompile", "run_part"]

ROOT = Path(__file__).resolve().parent
# the cache files a precompile that started from no cache wrote next to the modules, with
# their digests, the sources and numba they were compiled from: the test suite reuses them
# as they were at its start, instead of compiling its own copy for a minute
# (tests/test_precompile.py)
MANIFEST = ROOT / "__pycache__" / "precompiled.json"


def cache_digests(root: Path = ROOT) -> dict[str, str]:
    """numba's cache files under ``root`` (relative paths) and their SHA-1 digests."""
    return {
        str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*.nb[ic]"))
    }


def manifest(root: Path = ROOT) -> dict:
    """:data:`MANIFEST`'s content for the cache under ``root`` as it is now."""
    import numba

    from psvm.jit import psvm_sources_stamp

    return {
        "sources": psvm_sources_stamp(str(root)),
        "numba": numba.__version__,
        "files": cache_digests(root),
    }


def _write(path: str, X: np.ndarray, y: np.ndarray, first: int = 1) -> None:
    """A LIBSVM file; feature indices from ``first`` (0 for a precomputed kernel's)."""
    with open(path, "w") as f:
        for label, row in zip(y, X, strict=True):
            pairs = " ".join(f"{k + first}:{v:.6g}" for k, v in enumerate(row) if v != 0.0)
            f.write(f"{label:.6g} {pairs}\n")


def _problems(folder: Path) -> dict[str, str]:
    """LIBSVM files: two classes, three, a regression target, two classes over 1 MB
    (larger files take the compiled reader, and their kernel sums and predictions the
    threaded blocks), two classes of 0/1 features (integer rows' int8 copies) and two of
    features 0-255 (float32 copies, as skin_nonskin's: a first run compiled them 0.23 s)."""
    rng = np.random.default_rng(0)

    def sample(n: int, d: int, density: float) -> tuple[np.ndarray, np.ndarray]:
        X = rng.standard_normal((n, d))
        X[rng.random((n, d)) >= density] = 0.0
        return X, X[:, :2] @ [1.0, 0.5] + 0.3 * rng.standard_normal(n)

    # dense rows, and sparse ones (their columns take the sparse copy of the data)
    (X, score), (big, big_score) = sample(300, 10, 0.8), sample(4000, 300, 0.1)
    problems = {
        "small": (X, np.where(score > 0, 1, -1)),
        "small3": (X, np.digitize(score, [-0.5, 0.5])),
        "smallreg": (X, score),
        "large": (big, np.where(big_score > 0, 1, -1)),
        "binary": ((X != 0).astype(float), np.where(score > 0, 1, -1)),  # rbf by table: int8
        "bytes": (rng.integers(0, 256, X.shape).astype(float), np.where(score > 0, 1, -1)),
    }
    files = {name: str(folder / f"{name}.txt") for name in problems}
    for name, (X, y) in problems.items():
        _write(files[name], X, y)
    # -t 4's file: "label 0:serial 1:K(x, x_1) ..." on the first 100 rows, linear kernel
    rows = problems["small"][0][:100]
    gram = np.hstack([np.arange(1.0, 101.0)[:, None], rows @ rows.T])
    files["gram"] = str(folder / "gram.txt")
    _write(files["gram"], gram, problems["small"][1][:100], first=0)
    return files


# psvm-train jobs (options, problem), the estimators' helpers and the loop of mpiexec's ranks,
# in two parts that two processes compile side by side: the C-SVC loops and the nu loop are
# the longest compiles (docs/performance.md)
PARTS = (
    [
        ([], "small"),  # the README's job: C-SVC, rbf
        (["-t", "0", "-c", "10"], "small"),  # its reconstructions sum over a few rows
        (["-t", "1"], "small"),
        (["-t", "3"], "small"),
        ([], "small3"),
        (["-s", "2"], "small"),
        (["-s", "3"], "smallreg"),
        (["-b", "1"], "small3"),
        (["-s", "3", "-b", "1"], "smallreg"),
        (["-t", "4"], "gram"),
        (["-v", "3"], "small3"),
        ("estimators", None),
        ("ranks", None),
    ],
    [
        (["-s", "1"], "small3"),
        (["-s", "4"], "smallreg"),
        (["--solver", "sgd"], "small"),
        ([], "large"),
        ([], "binary"),
        ([], "bytes"),
        ("helpers", None),
    ],
)


def _cli(opts: list[str], data: str, folder: Path) -> None:
    from psvm.cli import predict, train

    model, out = str(folder / "m.model"), str(folder / "out.txt")
    if train.main(["-q", *opts, data, model]) != 0:
        raise RuntimeError(f"psvm-train {' '.join(opts)} {data} failed")
    flags = ["-b", "1"] if "-b" in opts else []
    if "-v" not in opts and predict.main(["-q", *flags, data, model, out]) != 0:
        raise RuntimeError(f"psvm-predict {data} failed")


def _helpers() -> None:
    """Compiled helpers that the jobs do not reach, called directly: the estimators' dense-input
    conversion and gamma='scale''s row sums (setup.py's build environment has no
    scikit-learn: the first fit compiled them for 2 s), and few-row kernel sums (a rank's few
    rows at a nu or one-class start; the jobs reach the same code: a safety net)."""
    import scipy.sparse as sp

    from psvm.kernels import RBF, csr_arrays
    from psvm.svc.columns import LocalKernel
    from psvm.svc.state import dense_csr, row_sums

    data, indices, indptr = dense_csr(np.ones((2, 2)))  # (psvm.faces.fit_input.as_csr's)
    row_sums(indptr, data)
    K = LocalKernel(sp.csr_matrix(np.ones((3, 2))), (RBF, 1.0, 0.0, 3))
    K.sums(csr_arrays(sp.csr_matrix(np.ones((2, 2)))), np.ones(2), np.arange(3))


def _estimators(files: dict[str, str]) -> None:
    """The estimators' own compiled helpers (dense input); skipped without scikit-learn, which
    setup.py's build environment leaves out (see :func:`_helpers`)."""
    try:
        from sklearn.datasets import load_svmlight_file
    except ImportError:
        return
    import psvm

    X, y = load_svmlight_file(files["small3"])
    dense = X.toarray()
    for data in (X, dense):
        psvm.SVC().fit(data, y).decision_function(data)
    _, target = load_svmlight_file(files["smallreg"])
    for model in (psvm.SVR(), psvm.NuSVR(), psvm.OneClassSVM()):
        model.fit(dense, target).predict(dense)
    psvm.NuSVC().fit(dense, y).predict(dense)
    psvm.SGDSVC().fit(dense, y).predict(dense)


def _ranks_loop() -> None:
    """The loop of ``mpiexec``'s ranks: the jobs above, one process each, ran the loop of one
    process (``run_serial``); ``run`` takes the same argument types."""
    from psvm.svc import engine, serial

    for signature in serial.run_serial.signatures:
        engine.run.compile(signature)


def run_part(k: int, log=lambda job, seconds: None) -> None:
    """Part ``k`` of :data:`PARTS` in this process; ``log(job, seconds)`` after each job."""
    with tempfile.TemporaryDirectory(prefix="psvm-precompile-") as tmp:
        folder = Path(tmp)
        files = _problems(folder)
        for opts, name in PARTS[k]:
            t0 = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):  # -v's accuracy line
                if opts == "estimators":
                    _estimators(files)
                elif opts == "helpers":
                    _helpers()
                elif opts == "ranks":
                    _ranks_loop()
                else:
                    _cli(opts, files[name], folder)
            job = opts if name is None else f"psvm-train {' '.join(opts)} {name}"
            log(f"part {k}: {job}", time.perf_counter() - t0)


def precompile(verbose: bool = False) -> float:
    """Run every part, side by side when there are cores for it (numba compiles and caches
    what they use); returns the wall seconds. Raises CalledProcessError if a part fails."""
    from psvm.threads import usable_cores

    t0 = time.perf_counter()
    command = [sys.executable, "-m", "psvm.precompile", *(["-v"] if verbose else []), "--part"]
    parts = range(len(PARTS))
    if usable_cores() > 1:
        procs = [subprocess.Popen([*command, str(k)]) for k in parts]
        codes = [p.wait() for p in procs]
    else:
        codes = [subprocess.call([*command, str(k)]) for k in parts]
    for k, code in zip(parts, codes, strict=True):
        if code != 0:
            raise subprocess.CalledProcessError(code, [*command, str(k)])
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m psvm.precompile", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("-v", action="store_true", help="print each job's time")
    parser.add_argument("--part", type=int, choices=range(len(PARTS)), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.part is not None:

        def log(job: str, seconds: float) -> None:
            if args.v:
                print(f"{seconds:6.1f}s  {job}", file=sys.stderr, flush=True)

        run_part(args.part, log)
        return 0
    with contextlib.suppress(OSError):
        MANIFEST.unlink(missing_ok=True)
    fresh = next(ROOT.rglob("*.nb[ic]"), None) is None and "NUMBA_CACHE_DIR" not in os.environ
    try:
        seconds = precompile(args.v)
    except subprocess.CalledProcessError as e:
        print(f"psvm: precompiling failed: {e}", file=sys.stderr)
        return 1
    # and the modules' bytecode, which pip writes for a regular install but not for an editable
    # one: under PYTHONDONTWRITEBYTECODE (CI machines) every rank compiled them at its start
    compileall.compile_dir(str(ROOT), quiet=2)
    written = manifest() if fresh else None
    if written and written["files"]:  # (none: numba cached elsewhere)
        with contextlib.suppress(OSError):
            MANIFEST.write_text(json.dumps(written, indent=0))
    print(f"psvm: compiled in {seconds:.1f}s (numba's disk cache)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

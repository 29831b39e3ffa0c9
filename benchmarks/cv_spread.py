"""The spread of -v 5 accuracies over random folds: LIBSVM's and psvm's, side by side.

    python benchmarks/cv_spread.py --shuffles 10

LIBSVM: ``svm_train(y, x, '-v 5')`` of libsvm-official called ``--shuffles`` times in one
process; its folds come from C's rand(), whose state runs on between calls, so every call
draws new folds. psvm: :func:`psvm.cross_validation.cross_validate` in one process with
seeds 0 .. shuffles - 1. Same C and gamma (LIBSVM's defaults: C = 1, gamma = 1 / the
number of features). Prints min, mean, max and standard deviation of each, and psvm's
seed-0 accuracy (what ``psvm-train -v 5`` prints by default).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from functools import partial

import numpy as np
import scipy.sparse as sp

from heuristics.bench import data_dir, head_path

# name: (file, rows)
PROBLEMS = {
    "heart_scale": ("heart_scale.xz", None),
    "a9a 3k": ("a9a.xz", 3000),
    "usps.t": ("usps.t.xz", None),
}


@contextlib.contextmanager
def _quiet_fd1():
    """LIBSVM's -v prints its fold lines from C, to file descriptor 1."""
    saved = os.dup(1)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        try:
            yield
        finally:
            os.dup2(saved, 1)
            os.close(saved)


def spread(path: str, shuffles: int) -> tuple[list[float], list[float]]:
    from libsvm import svmutil

    from psvm._params import validate_svc_params
    from psvm.comm import Comm
    from psvm.cross_validation import cross_validate, svc_fit_predict
    from psvm.io.shard import Shard

    y, X = svmutil.svm_read_problem(path, return_scipy=True)
    y, X = np.asarray(y), sp.csr_matrix(X, dtype=np.float64)
    X.indices = X.indices.astype(np.int32)
    gamma = 1.0 / X.shape[1]
    with _quiet_fd1():
        lib = [svmutil.svm_train(y, X, f"-q -v 5 -g {gamma!r}") for _ in range(shuffles)]
    _, first = np.unique(y, return_index=True)
    classes = y[np.sort(first)]
    if set(classes) == {1.0, -1.0}:
        classes = np.array([1.0, -1.0])
    shard = Shard(
        X=X,
        y=y,
        offset=0,
        n_samples=y.size,
        n_features=X.shape[1],
        max_row_nnz=int(np.diff(X.indptr).max()),
        classes=classes,
    )
    comm = Comm()
    make = partial(svc_fit_predict, params=validate_svc_params(gamma=gamma), classes=classes)
    ours = [
        100.0 * np.mean(cross_validate(comm, shard, 5, seed, make, classes) == y)
        for seed in range(shuffles)
    ]
    return lib, ours


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shuffles", type=int, default=10)
    args = ap.parse_args()
    print(f"# -v 5 accuracy (%) over {args.shuffles} random fold draws each")
    print("| problem | LIBSVM min / mean / max (sd) | psvm min / mean / max (sd) | psvm seed 0 |")
    print("| --- | --- | --- | ---: |")
    for name, (file, rows) in PROBLEMS.items():
        lib, ours = spread(head_path(data_dir() / file, rows), args.shuffles)

        def cell(a):
            return f"{min(a):.2f} / {np.mean(a):.2f} / {max(a):.2f} ({np.std(a):.2f})"

        print(f"| {name} | {cell(lib)} | {cell(ours)} | {ours[0]:.2f} |", flush=True)


if __name__ == "__main__":
    main()

"""MPI scenario: every rank fits psvm.SVC; every rank must end with the same model.

Usage: [mpiexec -n P python -m mpi4py] run_estimator.py --shared-data DIR

Runs every case in one launch (a launch costs more than a fit):

- ``digits-replicated`` / ``digits-sharded``: dense, 10 classes, sample_weight
  and class_weight='balanced'; sharded ranks pass contiguous blocks of rows.
- ``a9a-replicated`` / ``a9a-sharded``: sparse, two classes; sharded ranks pass
  CSR blocks cut to their own largest feature index (all but the last rank).
- ``digits-empty-rank``: sharded, rank 1 passes no rows (P >= 2).
- ``nan-on-last-rank``: sharded, the last rank's block holds a NaN: every rank
  must raise the same ValueError.
- ``grid``: GridSearchCV over psvm.SVC(comm=MPI.COMM_WORLD) on replicated data.

Assertions are collective: each rank gathers every rank's fitted attributes and
predictions and checks them against rank 0's, so all ranks fail alike. Rank 0
prints one JSON line: case -> fitted attributes and predictions (or the error).
Sharded blocks are in rank order, so ``support_`` indexes the same rows as in
one process.
"""

import argparse
import io
import json
import lzma

import numpy as np
from sklearn.datasets import load_digits, load_svmlight_file

import psvm
from psvm.comm import world


def load_head(path: str, n_rows: int, n_features: int):
    """The first n_rows rows of an xz-compressed LIBSVM file, as CSR."""
    with lzma.open(path, "rb") as f:
        lines = [f.readline() for _ in range(n_rows)]
    return load_svmlight_file(io.BytesIO(b"".join(lines)), n_features=n_features, zero_based=False)


def block(n: int, comm, skip: int | None = None) -> slice:
    """This rank's contiguous block of n rows; rank ``skip`` gets none."""
    ranks = [r for r in range(comm.size) if r != skip]
    if comm.rank not in ranks:
        return slice(0, 0)
    bounds = np.linspace(0, n, len(ranks) + 1).astype(int)
    i = ranks.index(comm.rank)
    return slice(bounds[i], bounds[i + 1])


def same_everywhere(comm, name: str, value) -> None:
    """Collective assertion: every rank holds the same value as rank 0."""
    values = comm.allgather_obj(np.asarray(value))
    for r, v in enumerate(values):
        assert v.shape == values[0].shape and np.array_equal(v, values[0]), (
            f"{name} on rank {r} differs from rank 0"
        )


def dense(a):
    return a.toarray() if hasattr(a, "toarray") else np.asarray(a)


def run_grid(comm, data: dict) -> dict:
    """GridSearchCV with an explicit communicator: clones share it, ranks run the same fits."""
    from mpi4py import MPI
    from sklearn.model_selection import GridSearchCV

    X, y, Xt, _ = data["digits"]
    grid = GridSearchCV(
        psvm.SVC(comm=MPI.COMM_WORLD), {"C": [1.0, 10.0], "gamma": [0.02, 0.1]}, cv=2
    ).fit(X[:300], y[:300])
    out = {
        "scores": grid.cv_results_["mean_test_score"],
        "predict": grid.predict(Xt),
        "support": grid.best_estimator_.support_,
    }
    for key, value in out.items():
        same_everywhere(comm, f"grid {key}", value)
    return {"best_params": grid.best_params_, **{k: v.tolist() for k, v in out.items()}}


def run_case(comm, name: str, data: dict) -> dict:
    if name == "grid":
        return run_grid(comm, data)
    dataset, mode = name.split("-", 1)
    X, y, Xt, params = data[dataset]
    distributed = "replicated" if mode == "replicated" else "sharded"
    sw = 1.0 + (np.arange(X.shape[0]) % 3) * 0.5 if dataset == "digits" else None
    if distributed == "sharded":
        rows = block(X.shape[0], comm, skip=1 if mode == "empty-rank" else None)
        X, y = X[rows], y[rows]
        sw = None if sw is None else sw[rows]
        if mode == "nan-on-last-rank" and comm.rank == comm.size - 1:
            X = X.copy()
            X[0, 0] = np.nan
        if hasattr(X, "indices") and X.nnz and comm.rank < comm.size - 1:
            # narrower, as a reader of this rank's lines alone would see it (the last rank
            # keeps the full width, as if it held the highest feature index)
            X = X[:, : int(X.indices.max()) + 1]
    clf = psvm.SVC(distributed=distributed, **params)
    try:
        clf.fit(X, y, sample_weight=sw)
    except ValueError as e:
        same_everywhere(comm, f"{name} error", str(e))
        return {"error": str(e)}
    out = {
        "predict": clf.predict(Xt),
        "decision_ovr": clf.decision_function(Xt),
        "support": clf.support_,
        "n_support": clf.n_support_,
        "dual_coef": dense(clf.dual_coef_),
        "intercept": clf.intercept_,
        "support_vectors": dense(clf.support_vectors_),
        "n_iter": clf.n_iter_,
        "shape_fit": np.array(clf.shape_fit_),
    }
    clf.set_params(decision_function_shape="ovo")
    out["decision_ovo"] = clf.decision_function(Xt)
    for key, value in out.items():
        same_everywhere(comm, f"{name} {key}", value)
    assert clf.fit_stats_["ranks"] == comm.size
    json.dumps(clf.fit_stats_)
    return {k: v.tolist() for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared-data", required=True)
    opts = ap.parse_args()
    comm = world()
    X, y = load_digits(return_X_y=True)
    Xa, ya = load_head(f"{opts.shared_data}/a9a.xz", 1200, n_features=123)
    Xat, _ = load_head(f"{opts.shared_data}/a9a.t.xz", 500, n_features=123)
    data = {
        "digits": (X[:600] / 16, y[:600], X / 16, dict(C=10, class_weight="balanced")),
        "a9a": (Xa, ya, Xat, dict(C=1.0, gamma=0.05)),
    }
    cases = ["digits-replicated", "digits-sharded", "a9a-replicated", "a9a-sharded", "grid"]
    if comm.size >= 2:
        cases += ["digits-empty-rank", "digits-nan-on-last-rank"]
    results = {name: run_case(comm, name, data) for name in cases}
    if comm.rank == 0:
        print(json.dumps({"ranks": comm.size, "cases": results}), flush=True)


if __name__ == "__main__":
    main()

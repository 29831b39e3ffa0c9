"""MPI scenario: psvm.SGDSVC on every rank, sharded rows, an explicit communicator.

Usage: mpiexec -n P python -m mpi4py run_sgd_estimator.py

Cases: a good sharded fit (every rank must end with the same model), one
warm-started from it, one with early stopping; a sparse sharded fit whose last
rank lacks the highest feature (same model, global width); a fit in which rank
0 passes no rows; a NaN in the last rank's rows (fit), a negative sample weight
there (fit), a label outside ``classes`` on the last rank and other ``classes``
there (partial_fit), a warm start on narrower X: every rank must raise the same
ValueError instead of waiting in a collective. Every fit duplicates
the communicator and must free it. Rank 0 prints one JSON line.
"""

import json

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI
from sklearn.datasets import make_blobs

import psvm
from psvm.comm import Comm, world


def main():
    comm = world()
    freed = []
    free = Comm.free

    def counting_free(self):
        freed.append(self.size)
        free(self)

    Comm.free = counting_free
    X_full, y_full = make_blobs(
        n_samples=300, centers=2, n_features=5, random_state=0, cluster_std=2.0
    )
    rows = np.array_split(np.arange(300), comm.size)[comm.rank]
    X, y = X_full[rows], y_full[rows]
    last = comm.rank == comm.size - 1

    def sgd():
        return psvm.SGDSVC(alpha=1e-3, random_state=0, comm=MPI.COMM_WORLD, distributed="sharded")

    coef = comm.allgather_obj(sgd().fit(X, y).coef_)
    out = {"same_model": all(np.array_equal(c, coef[0]) for c in coef), "errors": {}}
    X_narrow = sp.csr_matrix(X[:, :4] if last else X)  # the last rank never sees feature 5
    narrow = sgd().fit(X_narrow, y)
    narrow.partial_fit(X_narrow, y)
    coef = comm.allgather_obj(narrow.coef_)
    out["narrow"] = {
        "same_model": all(np.array_equal(c, coef[0]) for c in coef),
        "n_features_in": narrow.n_features_in_,
        "coef_width": coef[0].shape[1],
    }
    empty = sgd().fit(X[:0], y[:0]) if comm.rank == 0 else sgd().fit(X, y)
    coef = comm.allgather_obj(empty.coef_)
    out["empty rank"] = {
        "same_model": all(np.array_equal(c, coef[0]) for c in coef),
        "n_samples": empty.fit_stats_["values"]["n_samples"],
        "accuracy": empty.score(X_full, y_full),
    }
    warm = sgd().set_params(warm_start=True).fit(X, y)
    coef = comm.allgather_obj(warm.set_params(max_iter=2).fit(X, y).coef_)
    out["warm start"] = {
        "same_model": all(np.array_equal(c, coef[0]) for c in coef),
        "n_iter": warm.n_iter_,
        "accuracy": warm.score(X_full, y_full),
    }
    early = sgd().set_params(early_stopping=True, validation_fraction=0.2).fit(X, y)
    coef = comm.allgather_obj(early.coef_)
    out["early stopping"] = {
        "same_model": all(np.array_equal(c, coef[0]) for c in coef),
        "n_samples": early.fit_stats_["values"]["n_samples"],
    }
    # weighted: the held-out rows' accuracy by their weights, summed over the ranks
    noisy = np.where(np.random.default_rng(1).random(300) < 0.2, 1 - y_full, y_full)[rows]
    w = np.random.default_rng(2).uniform(0.1, 5.0, 300)[rows]
    masks, held_out = [], psvm.SGDSVC._held_out

    def kept(*args):  # this rank's held-out rows, as the fit chose them
        masks.append(held_out(*args))
        return masks[-1]

    psvm.SGDSVC._held_out = staticmethod(kept)
    weighted = sgd().set_params(early_stopping=True, validation_fraction=0.3, max_iter=2, tol=None)
    weighted.fit(X, noisy, sample_weight=w)
    psvm.SGDSVC._held_out = staticmethod(held_out)
    out["held-out rows"] = sorted(sum(comm.allgather_obj(rows[masks[0]].tolist()), []))
    right = weighted.predict(X[masks[0]]) == noisy[masks[0]]
    sums = comm.allgather_obj([float(w[masks[0]][right].sum()), float(w[masks[0]].sum())])
    out["weighted early stopping"] = {
        "traced": weighted.fit_stats_["traces"]["val_accuracy"][-1],
        "weighted": sum(a for a, _ in sums) / sum(b for _, b in sums),
    }
    X_nan, y_bad, sw = X.copy(), y.copy(), np.ones(y.size)
    if last:
        X_nan[0, 0], y_bad[0], sw[0] = np.nan, 7, -1.0
    cases = {
        "nan": lambda: sgd().fit(X_nan, y),
        "negative weight": lambda: sgd().fit(X, y, sample_weight=sw),
        "unknown label": lambda: sgd().partial_fit(X, y_bad, classes=[0, 1]),
        "other classes": lambda: sgd().partial_fit(X, y, classes=[0, 1, 2] if last else [0, 1]),
        "warm start, other width": lambda: warm.fit(X[:, :4], y),
    }
    for name, call in cases.items():
        try:
            call()
            message = None
        except ValueError as e:
            message = str(e)
        messages = comm.allgather_obj(message)
        out["errors"][name] = messages[0] if len(set(messages)) == 1 else messages
    out["freed"] = freed
    if comm.rank == 0:
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()

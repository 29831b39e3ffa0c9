"""MPI scenario: worker processes of a rank (joblib n_jobs, a fork pool) fit as one process.

Usage: mpiexec -n P python run_grid_jobs.py

Every rank runs the same GridSearchCV over psvm.SVC and psvm.SGDSVC with
``n_jobs=2`` (loky spawns the workers) and with ``n_jobs=1``: the scores and best
parameters must agree, on every rank, with those of fits under MPI (SVC's model
does not depend on the number of ranks) or of one process (``comm=COMM_SELF``:
SGDSVC's does).
Then a fork pool fits in children of a rank that already initialised MPI, and
``distributed='sharded'`` in a worker must be refused with a clear message.
Collective assertions; rank 0 prints one JSON line.
"""

import json
import multiprocessing

from mpi4py import MPI
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV

import psvm
from psvm.comm import world

X, y = load_digits(return_X_y=True)
X, y = X[:240] / 16, y[:240]


def fit_in_child(C):
    """A fit in a forked child: one process, so it holds the whole fitted model."""
    from psvm.comm import mpi_worker

    clf = psvm.SVC(C=C, gamma=0.05).fit(X, y)
    return mpi_worker(), clf.fit_stats_["ranks"], clf.support_.tolist()


def same_everywhere(comm, name, value):
    values = comm.allgather_obj(value)
    assert all(v == values[0] for v in values), f"{name} differs between ranks: {values}"


def main():
    comm = world()
    out = {}
    one = MPI.COMM_SELF
    for name, est, ref, grid in [
        ("svc", psvm.SVC(), psvm.SVC(), {"C": [1.0, 10.0], "gamma": [0.02, 0.05]}),
        (
            "sgd",
            psvm.SGDSVC(random_state=0),
            psvm.SGDSVC(random_state=0, comm=one),
            {"alpha": [1e-3, 1e-2]},
        ),
    ]:
        runs = {}
        for n_jobs, e in ((1, ref), (2, est)):
            g = GridSearchCV(e, grid, cv=2, n_jobs=n_jobs, error_score="raise").fit(X, y)
            runs[n_jobs] = {
                "scores": g.cv_results_["mean_test_score"].tolist(),
                "best": g.best_params_,
            }
        assert runs[1] == runs[2], (name, runs)
        same_everywhere(comm, name, runs[2])
        out[name] = runs[2]["scores"]
    psvm.SVC(C=10.0, gamma=0.05).fit(X, y)  # MPI is up in this rank before it forks
    with multiprocessing.get_context("fork").Pool(2) as pool:
        children = pool.map(fit_in_child, [1.0, 10.0])
    mpi_fit = psvm.SVC(C=10.0, gamma=0.05).fit(X, y)
    assert children[1] == (True, 1, mpi_fit.support_.tolist()), children
    out["fork"] = [c[:2] for c in children]
    try:
        GridSearchCV(
            psvm.SVC(distributed="sharded"), {"C": [1.0]}, cv=2, n_jobs=2, error_score="raise"
        ).fit(X, y)
        out["sharded"] = "fitted"
    except ValueError as e:
        out["sharded"] = str(e)
    same_everywhere(comm, "sharded", out["sharded"])
    if comm.rank == 0:
        print(json.dumps({"ranks": comm.size, **out}), flush=True)


if __name__ == "__main__":
    main()

"""MPI scenario: psvm.SGDSVC on every rank, sharded rows, an explicit communicator.

Usage: mpiexec -n P python -m mpi4py run_sgd_estimator.py

Cases: a good sharded fit (every rank must end with the same model); a NaN in
the last rank's rows (fit) and a label outside ``classes`` on the last rank
(partial_fit): every rank must raise the same ValueError instead of waiting in
a collective. Every fit duplicates the communicator and must free it. Rank 0
prints one JSON line.
"""

import json

import numpy as np
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
    X, y = make_blobs(n_samples=300, centers=2, n_features=5, random_state=0, cluster_std=2.0)
    rows = np.array_split(np.arange(300), comm.size)[comm.rank]
    X, y = X[rows], y[rows]
    last = comm.rank == comm.size - 1

    def sgd():
        return psvm.SGDSVC(alpha=1e-3, random_state=0, comm=MPI.COMM_WORLD, distributed="sharded")

    coef = comm.allgather_obj(sgd().fit(X, y).coef_)
    out = {"same_model": all(np.array_equal(c, coef[0]) for c in coef), "errors": {}}
    X_nan, y_bad = X.copy(), y.copy()
    if last:
        X_nan[0, 0], y_bad[0] = np.nan, 7
    cases = {
        "nan": lambda: sgd().fit(X_nan, y),
        "unknown label": lambda: sgd().partial_fit(X, y_bad, classes=[0, 1]),
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

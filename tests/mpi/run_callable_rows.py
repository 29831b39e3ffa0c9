"""MPI scenario: a callable kernel's fit when a rank holds no rows, and sharded X of other
types on the ranks.

Usage: [mpiexec -n P python] run_callable_rows.py CASE

CASE ``empty``: a kernel that refuses an empty array, as scikit-learn's do, sharded with
the last rank's block empty, and replicated with fewer rows than ranks; rank 0 prints one
JSON line: form -> hex digest of dual_coef_, intercept_, support_. ``mixed``: rank 0
passes an array, the others lists: every rank raises the same TypeError, which rank 0
prints as ``error: ...``.
"""

import hashlib
import json
import sys

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI
from sklearn.metrics.pairwise import check_pairwise_arrays

import psvm
from psvm._params import KERNELS
from psvm.kernels import kernel_matrix


def kernel(A, B):
    """psvm's RBF values (each row computed alone: the same bits in any block of rows),
    refusing an empty A as scikit-learn's pairwise kernels do."""
    A, B = check_pairwise_arrays(A, B)
    return kernel_matrix(sp.csr_matrix(A), sp.csr_matrix(B), KERNELS["rbf"], 0.5, 0.0, 3)


def digest(est) -> str:
    h = hashlib.sha256()
    for a in (est.dual_coef_, est.intercept_, est.support_):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:24]


def main() -> None:
    comm = MPI.COMM_WORLD
    X = np.random.default_rng(0).normal(size=(20, 3))
    y = np.where(X[:, 0] + X[:, 1] > 0, 1, 2)
    if sys.argv[1] == "mixed":
        rows = X if comm.rank == 0 else X.tolist()
        try:
            psvm.SVC(kernel=kernel, comm=comm, distributed="sharded").fit(rows, y)
        except TypeError as e:
            if comm.rank == 0:
                print(f"error: {e}", flush=True)
        return
    blocks = max(comm.size - 1, 1)  # the last of several ranks holds no rows
    bounds = np.linspace(0, X.shape[0], blocks + 1).astype(int)
    mine = slice(bounds[comm.rank], bounds[comm.rank + 1]) if comm.rank < blocks else slice(0, 0)
    two = [int(np.argmax(y == 1)), int(np.argmax(y == 2))]  # fewer rows than ranks
    out = {
        "sharded": digest(
            psvm.SVC(kernel=kernel, comm=comm, distributed="sharded").fit(X[mine], y[mine])
        ),
        "replicated": digest(psvm.SVC(kernel=kernel, comm=comm).fit(X[two], y[two])),
    }
    if comm.rank == 0:
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()

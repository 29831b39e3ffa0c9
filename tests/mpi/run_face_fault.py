"""MPI scenario: one rank of a face fails unexpectedly while the others wait in a collective.

Usage: mpiexec -n P python run_face_fault.py FACE ERROR RANK [TRAIN_ARGS...]

FACE ``svc`` or ``sgd``: ``psvm.SVC`` / ``psvm.SGDSVC`` fit a small blob problem;
``train``: psvm-train with TRAIN_ARGS. ERROR (``TypeError``, ``MemoryError``,
``KeyboardInterrupt``) is raised on RANK where training starts (``fit_ovo``,
or ``make_problem`` for SGD), while the other ranks enter its first collective.
RANK first prints ``injected at T`` (``time.time()``) so the test can time the
exit. Run it with plain ``python``, not ``python -m mpi4py``, whose own abort on
an unhandled exception would hide a hang.
"""

import sys
import time

import numpy as np
from sklearn.datasets import make_blobs

import psvm
import psvm.sgd.estimator
import psvm.svc.multiclass
from psvm.comm import world


def _inject(error: str):
    def fail(*args, **kwargs):
        print(f"injected at {time.time()!r}", file=sys.stderr, flush=True)
        raise {
            "TypeError": TypeError,
            "MemoryError": MemoryError,
            "KeyboardInterrupt": KeyboardInterrupt,
        }[error](f"injected {error}")

    return fail


if __name__ == "__main__":
    face, error, rank, argv = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    if world().rank == rank:
        psvm.svc.multiclass.fit_ovo = _inject(error)
        psvm.sgd.estimator.make_problem = _inject(error)
    if face == "train":
        from psvm.cli.train import main

        sys.exit(main(argv))
    X, y = make_blobs(n_samples=300, centers=3, n_features=4, random_state=0)
    est = psvm.SVC() if face == "svc" else psvm.SGDSVC(random_state=0)
    est.fit(X, y)
    print(f"rank {world().rank} fitted: {np.mean(est.predict(X) == y):.2f}", flush=True)

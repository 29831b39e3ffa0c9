"""MPI scenario: how many numba threads each rank runs, by default and with overrides.

Usage: mpiexec -n P python -m mpi4py run_threads.py DIR

Cases: the ranks on this node (a shared-memory split) and the default count
applied; psvm.SVC and psvm.SGDSVC fits (the count during the fit, and
numba's count restored afterwards), also with a count of their own on ranks 1+
only; psvm.SVC.predict, local to a rank (the count while the decision values
are computed, then numba's restored); psvm-train (smo and sgd) in this process
by default and with ``-o 1`` (on every rank, or on rank 1 only), and
psvm-predict, which leave the count set. ``DIR`` receives a
small training file. Before every case each rank sets numba's whole pool, so
a case that applies nothing shows it. Rank 0 prints one JSON line: per case,
every rank's count.
"""

import json
import os
import sys

import numba
import numpy as np
from sklearn.datasets import make_blobs

import psvm
import psvm.model
from psvm.cli import predict, train
from psvm.comm import world
from psvm.threads import apply_threads

TOP = numba.config.NUMBA_NUM_THREADS


def main(folder: str) -> None:
    comm = world()
    X, y = make_blobs(n_samples=200, centers=2, n_features=4, random_state=0)
    data = os.path.join(folder, "blobs.txt")
    if comm.rank == 0:
        with open(data, "w") as f:
            for row, label in zip(X, y, strict=True):
                feats = " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(row))
                f.write(f"{2 * label - 1} {feats}\n")
    comm.allgather_obj(None)  # the file is written before any rank reads it

    def every_rank(value) -> list:
        return comm.allgather_obj(value)

    out = {"top": every_rank(TOP), "local_size": every_rank(comm.local_size())}
    # found once: a later call is no collective (rank 0 alone asks again, and no rank waits)
    again = comm.local_size() if comm.rank == 0 else None
    out["local_size again"] = every_rank(again)
    numba.set_num_threads(TOP)
    out["default"] = every_rank([apply_threads(None, comm), numba.get_num_threads()])
    fitted = {}
    for cls in (psvm.SVC, psvm.SGDSVC):
        numba.set_num_threads(TOP)
        est = fitted[cls] = cls().fit(X, y)  # replicated: every rank passes the whole set
        out[cls.__name__] = every_rank(
            [est.fit_stats_["values"]["n_threads"], numba.get_num_threads()]
        )
    # each rank its own count (the docs allow it: no bit of the model changes); rank 0 by
    # default, the others two threads: the same model, no rank waiting in another's collective
    mixed = {
        "SVC n_threads": (psvm.SVC, {}, {"n_threads": 2}),
        "SVC n_jobs": (psvm.SVC, {}, {"n_jobs": 2}),
        "SGDSVC n_threads": (psvm.SGDSVC, {"random_state": 0}, {"n_threads": 2}),
    }
    for name, (cls, common, own) in mixed.items():
        numba.set_num_threads(TOP)
        est = cls(**common, **(own if comm.rank else {})).fit(X, y)
        alike = cls(**common).fit(X, y)  # (SGD's seed is random by default)
        same = bool(np.array_equal(est.decision_function(X), alike.decision_function(X)))
        out[name] = every_rank([est.fit_stats_["values"]["n_threads"], same])
    seen = []
    compiled = psvm.model.decision_values

    def counting(*args):
        seen.append(numba.get_num_threads())
        return compiled(*args)

    psvm.model.decision_values = counting
    numba.set_num_threads(TOP)
    fitted[psvm.SVC].predict(X)
    out["SVC.predict"] = every_rank([seen[-1], numba.get_num_threads()])
    psvm.model.decision_values = compiled
    model = os.path.join(folder, "blobs.model")
    for name, argv in {
        "cli": ["-q", data, model],
        "cli -o 1": ["-q", "-o", "1", data, model],
        "cli -o 2 on rank 1": ["-q", *(["-o", "2"] if comm.rank == 1 else []), data, model],
        "cli -o -1 on rank 1": ["-q", *(["-o", "-1"] if comm.rank == 1 else []), data, model],
        "cli sgd": ["--solver", "sgd", "--epochs", "2", "-q", data, model],
    }.items():
        numba.set_num_threads(TOP)
        code = train.main(argv)
        out[name] = every_rank([code, numba.get_num_threads()])
    numba.set_num_threads(TOP)
    code = predict.main(["-q", data, model, os.path.join(folder, "blobs.out")])
    out["cli predict"] = every_rank([code, numba.get_num_threads()])
    if comm.rank == 0:
        print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])

"""MPI scenario: the sums that feed the model have the same bits for every P.

Usage: [mpiexec -n P python -m mpi4py] run_exact_sums.py --shared-data DIR [--lockstep]

psvm.SVC(gamma='scale') on usps.t (dense-ish, 10 classes), each rank passing a
contiguous block of rows. Rank 0 prints one JSON line: "bits", the resolved gamma, the
intercepts, the dual coefficients and the objectives as exact float bits; "stats", the
fit's counters, its traces of iterations and active rows, and how the pairs ran. The ranks
solve whole pairs each (psvm.svc.pairs.deal), or with ``--lockstep`` every pair together.
"""

import argparse
import json
import lzma

import numpy as np
from mpi4py import MPI
from sklearn.datasets import load_svmlight_file

import psvm
from psvm.svc import pairs


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shared-data", required=True)
    p.add_argument("--lockstep", action="store_true")
    a = p.parse_args()
    if a.lockstep:
        pairs.DEAL_SHARE = float("inf")  # never dealt
    comm = MPI.COMM_WORLD
    with lzma.open(f"{a.shared_data}/usps.t.xz") as f:
        X, y = load_svmlight_file(f, n_features=256)
    X, y = X[:800], y[:800]
    lo, hi = (X.shape[0] * r // comm.size for r in (comm.rank, comm.rank + 1))
    clf = psvm.SVC(gamma="scale", distributed="sharded").fit(X[lo:hi], y[lo:hi])
    bits = {
        "gamma": float(clf._gamma).hex(),
        "intercept": [float(v).hex() for v in clf.intercept_],
        "dual_coef": [
            float(v).hex()
            for v in np.asarray(
                clf.dual_coef_.todense() if hasattr(clf.dual_coef_, "todense") else clf.dual_coef_
            ).ravel()
        ],
        "objective": [float(v).hex() for v in clf.fit_stats_["values"]["objective"]],
    }
    st = clf.fit_stats_
    stats = {
        "counts": st["counts"],
        "traces": {k: st["traces"][k] for k in ("iter", "active", "cache_misses")},
        "pairs_dealt": st["values"].get("pairs_dealt"),
    }
    if comm.rank == 0:
        print(json.dumps({"bits": bits, "stats": stats}))


if __name__ == "__main__":
    main()

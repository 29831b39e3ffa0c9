"""MPI scenario: every rank fits psvm.SVR, NuSVR, OneClassSVM and NuSVC (replicated and
sharded).

Usage: [mpiexec -n P python -m mpi4py] run_svm_types.py --shared-data DIR

Rank 0 prints one JSON line: case -> the fitted model's bits (hex of dual_coef_,
intercept_, support_) and predictions, so the test compares them across P.
Sharded ranks pass contiguous blocks of rows in rank order.
"""

import argparse
import hashlib
import io
import json
import lzma

import numpy as np
from mpi4py import MPI
from sklearn.datasets import load_svmlight_file

import psvm


def digest(est) -> str:
    h = hashlib.sha256()
    for a in (est.dual_coef_, est.intercept_, est.support_):
        h.update(np.ascontiguousarray(a.toarray() if hasattr(a, "toarray") else a).tobytes())
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared-data", required=True)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    with lzma.open(f"{args.shared_data}/abalone_scale.xz", "rb") as f:
        head = b"".join(f.readline() for _ in range(700))
    X, y = load_svmlight_file(io.BytesIO(head), zero_based=False)
    X, Xt = X[:600], X[600:]
    y = y[:600]
    bounds = np.linspace(0, X.shape[0], comm.size + 1).astype(int)
    mine = slice(bounds[comm.rank], bounds[comm.rank + 1])
    out = {}
    for name, make in (
        ("svr", lambda **k: psvm.SVR(C=10, gamma=0.5, comm=comm, **k)),
        ("one_class", lambda **k: psvm.OneClassSVM(nu=0.3, gamma=0.5, comm=comm, **k)),
        ("nu_svr", lambda **k: psvm.NuSVR(nu=0.3, C=10, gamma=0.5, comm=comm, **k)),
        ("nu_svc", lambda **k: psvm.NuSVC(nu=0.2, gamma=0.5, comm=comm, **k)),
    ):
        for dist in ("replicated", "sharded"):
            labels = y if name != "nu_svc" else np.where(y > 9, 1.0, -1.0)  # rings > 9
            Xd, yd = (X, labels) if dist == "replicated" else (X[mine], labels[mine])
            est = make(distributed=dist).fit(Xd, yd)
            pred = est.predict(Xt)
            same = comm.allgather(digest(est))
            assert len(set(same)) == 1, f"{name} {dist}: ranks differ"
            out[f"{name}-{dist}"] = [same[0], pred.tolist()]
    if comm.rank == 0:
        print(json.dumps(out))


if __name__ == "__main__":
    main()

"""MPI scenario: every kernel type fitted with an explicit kernel, its Gram matrix
(kernel='precomputed') and a callable, replicated and sharded (#18 item 3).

Usage: [mpiexec -n P python -m mpi4py] run_precomputed.py --shared-data DIR

The Gram matrices are psvm's own kernel values (psvm.kernels.kernel_matrix), so the
three forms should give the same model bit for bit. Rank 0 prints one JSON line: case ->
[hex digest of dual_coef_, intercept_, support_; of the test predictions or decision
values]. Sharded ranks pass contiguous blocks of rows (of X, or of the Gram matrix).
"""

import argparse
import hashlib
import io
import json
import lzma

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI
from sklearn.datasets import load_svmlight_file

import psvm
from psvm._params import KERNELS
from psvm.kernels import kernel_matrix

GAMMA = 0.2


def digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a.toarray() if hasattr(a, "toarray") else a).tobytes())
    return h.hexdigest()[:24]


def gram(kernel):
    """psvm's kernel values K(A, B), as a callable kernel."""

    def k(A, B):
        return kernel_matrix(sp.csr_matrix(A), sp.csr_matrix(B), KERNELS[kernel], GAMMA, 0.0, 3)

    return k


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared-data", required=True)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    with lzma.open(f"{args.shared_data}/heart_scale.xz", "rb") as f:
        X, y = load_svmlight_file(io.BytesIO(f.read()), zero_based=False)
    X = X.toarray()
    X, Xt, y = X[:200], X[200:], y[:200]
    bounds = np.linspace(0, X.shape[0], comm.size + 1).astype(int)
    mine = slice(bounds[comm.rank], bounds[comm.rank + 1])
    target = X[:, 0] + X[:, 2]  # a regression target for SVR and NuSVR
    out = {}
    for name, make, labels in (
        ("svc", lambda **k: psvm.SVC(C=2.0, **k), y),
        ("nu_svc", lambda **k: psvm.NuSVC(nu=0.3, **k), y),
        ("one_class", lambda **k: psvm.OneClassSVM(nu=0.3, **k), None),
        ("svr", lambda **k: psvm.SVR(C=2.0, epsilon=0.05, **k), target),
        ("nu_svr", lambda **k: psvm.NuSVR(nu=0.3, C=2.0, **k), target),
    ):
        for kernel in ("linear", "rbf"):
            K, Kt = gram(kernel)(X, X), gram(kernel)(Xt, X)
            forms = {
                "explicit": (dict(kernel=kernel, gamma=GAMMA), X, Xt),
                "precomputed": (dict(kernel="precomputed"), K, Kt),
                "callable": (dict(kernel=gram(kernel)), X, Xt),
            }
            for form, (params, train, test) in forms.items():
                for dist in ("replicated", "sharded"):
                    mine_rows = train if dist == "replicated" else train[mine]
                    mine_y = labels if labels is None or dist == "replicated" else labels[mine]
                    est = make(comm=comm, distributed=dist, **params).fit(mine_rows, mine_y)
                    dec = est.predict(test) if "svr" in name else est.decision_function(test)
                    pair = [digest(est.dual_coef_, est.intercept_, est.support_), digest(dec)]
                    same = comm.allgather(pair)
                    assert all(p == pair for p in same), f"{name} {kernel} {form}: ranks differ"
                    out[f"{name}-{kernel}-{form}-{dist}"] = pair
    if comm.rank == 0:
        print(json.dumps(out))


if __name__ == "__main__":
    main()

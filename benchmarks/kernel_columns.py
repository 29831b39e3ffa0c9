"""Kernel-column paths: microseconds per RBF column for CSR, CSC, dense and (integer data) the
int8 copy with its exp table, against scikit-learn.

    python benchmarks/kernel_columns.py --data a9a,w8a,ijcnn1 --columns 200

For each data set (full training file), the same columns K(x_r, all rows) are
computed by psvm's numba paths and by ``sklearn.metrics.pairwise.rbf_kernel``
(the reference, one column at a time as an SMO solver asks for them). One
process, one thread, except the "Nt" columns: the dense and int8 paths split into numba's N
threads (``dense_column_threads``, ``table_column_threads``), as a one-process fit takes a
large column. The psvm paths must agree bitwise; the script
checks it. The int8 path (``column_table``) serves data whose values are integers within an
exp table (0/1 features: a9a, w8a); "-" elsewhere.
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np
from sklearn.metrics.pairwise import rbf_kernel

from heuristics.bench import DATASETS, dataset_paths, load_csr
from psvm.kernels import (
    RBF,
    column_csc,
    column_csr,
    column_dense,
    column_table,
    csr_arrays,
    dense_column_threads,
    from_pre,
    is_integral,
    rbf_table,
    row_sq_norms,
    table_column_threads,
)


def per_column(fn, n_cols: int) -> float:
    fn(0)  # compile / warm up
    t0 = time.perf_counter()
    for r in range(n_cols):
        fn(r)
    return (time.perf_counter() - t0) / n_cols * 1e6


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="a9a,w8a,ijcnn1")
    p.add_argument("--columns", type=int, default=200)
    a = p.parse_args(argv)
    t = f"{numba.get_num_threads()}t"
    print(
        f"{'data':8s} {'rows':>6s} {'nnz/row':>7s} {'CSR us':>8s} {'CSC us':>8s} "
        f"{'dense us':>8s} {'int8 us':>8s} {'dense ' + t:>8s} {'int8 ' + t:>8s} "
        f"{'sklearn us':>10s} {'best/sklearn':>12s}"
    )
    for name in a.data.split(","):
        measure(name, a.columns)


def measure(name: str, n_cols: int) -> None:
    """One table row: the full training file of ``name``."""
    ds = DATASETS[name]
    X, _ = load_csr(dataset_paths(ds, None, None)[0], ds.n_features)
    n, d = X.shape
    ip, ix, dx = csr_arrays(X)
    sq = row_sq_norms(ip, dx, np.empty(n))
    Xc = X.tocsc()
    Xc.sort_indices()
    cp, ri, cd = csr_arrays(Xc)
    XT = np.ascontiguousarray(X.T.toarray())
    rows = np.arange(n, dtype=np.int64)
    kp = (RBF, ds.gamma, 0.0, 3)
    work, dots = np.zeros(d + 1), np.zeros(n)
    outs = {k: np.empty(n) for k in ("csr", "csc", "dense", "dense 2t")}
    T = numba.get_num_threads()

    def x(r):
        return ix[ip[r] : ip[r + 1]], dx[ip[r] : ip[r + 1]], sq[r]

    paths = {  # each path as the solver runs it (CSR and CSC: numba, then exp in from_pre)
        "csr": lambda r: from_pre(
            RBF, column_csr(*x(r), ip, ix, dx, sq, rows, *kp, work, outs["csr"])
        ),
        "csc": lambda r: from_pre(
            RBF, column_csc(*x(r), cp, ri, cd, sq, rows, *kp, dots, outs["csc"])
        ),
        "dense": lambda r: column_dense(*x(r), XT, sq, rows, *kp, dots, outs["dense"]),
        "dense 2t": lambda r: dense_column_threads(*x(r), XT, sq, *kp, outs["dense 2t"], T),
    }
    table = rbf_table(ds.gamma, 4.0 * sq.max()) if is_integral(dx) else np.zeros(0)
    if table.size:
        XT8, acc = XT.astype(np.int8), np.empty(min(n, 1024), dtype=np.int16)
        outs["int8"] = np.empty(n)
        paths["int8"] = lambda r: column_table(*x(r), XT8, sq, rows, table, acc, dots, outs["int8"])
        acc_t, outs["int8 2t"] = np.empty(T * 1024, dtype=np.int16), np.empty(n)
        paths["int8 2t"] = lambda r: table_column_threads(
            *x(r), XT8, sq, table, acc_t, outs["int8 2t"], T
        )
    us = {k: per_column(f, n_cols) for k, f in paths.items()}
    us["sklearn"] = per_column(lambda r: rbf_kernel(X, X[r], gamma=ds.gamma), n_cols)
    r = n_cols - 1
    for f in paths.values():
        f(r)
    assert all(np.array_equal(outs["csr"], o) for o in outs.values()), "paths differ"
    best = min(v for k, v in us.items() if k != "sklearn")
    int8, int8_t = (f"{us[k]:8.0f}" if k in us else f"{'-':>8s}" for k in ("int8", "int8 2t"))
    print(
        f"{name:8s} {n:6d} {X.nnz / n:7.1f} {us['csr']:8.0f} {us['csc']:8.0f} "
        f"{us['dense']:8.0f} {int8} {us['dense 2t']:8.0f} {int8_t} "
        f"{us['sklearn']:10.0f} {best / us['sklearn']:12.2f}"
    )


if __name__ == "__main__":
    main()

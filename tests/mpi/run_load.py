"""MPI scenario: load files with load_shard, gather the shards on rank 0.

Usage: mpiexec -n P python -m mpi4py run_load.py [options] PATH...

Rank 0 prints one JSON line: a list with, per case (each path with
``balance=True`` then ``False`` under ``--balance both``), the agreed metadata and
every rank's shard description, or every rank's error message (``--catch``);
with ``--out DIR`` it also writes the gathered matrix to ``DIR/case{i}.npz``.
Without ``--catch`` an error makes each rank print ``rank R: Type: message``
to stderr and exit 1, as a CLI would.
"""

import argparse
import json
import os
import sys

import numpy as np

from psvm.comm import Comm
from psvm.io.shard import load_shard


def describe(comm, shard):
    """Metadata and per-rank shard facts, plus the gathered CSR arrays."""
    X = shard.X
    local = {
        "offset": shard.offset,
        "n_local": X.shape[0],
        "shape": list(X.shape),
        "nnz": int(X.nnz),
        "indices_dtype": str(X.indices.dtype),
        "data_dtype": str(X.data.dtype),
        "y_size": int(shard.y.size),
        "n_samples": shard.n_samples,
        "n_features": shard.n_features,
        "max_row_nnz": shard.max_row_nnz,
        "classes": shard.classes.tolist(),
    }
    arrays = {
        "row_nnz": comm.allgatherv(np.diff(X.indptr).astype(np.int64)),
        "indices": comm.allgatherv(X.indices.astype(np.int32)),
        "data": comm.allgatherv(X.data),
        "y": comm.allgatherv(shard.y),
    }
    return {"ok": True, "shards": comm.allgather_obj(local)}, arrays


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--n-features", type=int, default=None)
    ap.add_argument("--min-classes", type=int, default=2)
    ap.add_argument("--balance", choices=["yes", "no", "both"], default="both")
    ap.add_argument("--catch", action="store_true")
    ap.add_argument("--out", default=None)
    opts = ap.parse_args()
    comm = Comm()
    balances = {"yes": [True], "no": [False], "both": [True, False]}[opts.balance]
    results = []
    cases = [(path, balance) for path in opts.paths for balance in balances]
    for i, (path, balance) in enumerate(cases):
        try:
            shard = load_shard(
                comm,
                path,
                n_features=opts.n_features,
                min_classes=opts.min_classes,
                balance=balance,
            )
        except (ValueError, OSError) as e:
            msg = f"{type(e).__name__}: {e}"
            if not opts.catch:
                print(f"rank {comm.rank}: {msg}", file=sys.stderr, flush=True)
                comm.allgather_obj(None)  # every rank has printed before anyone exits
                sys.exit(1)
            results.append({"ok": False, "errors": comm.allgather_obj(msg)})
            continue
        res, arrays = describe(comm, shard)
        results.append(res)
        if comm.rank == 0 and opts.out:
            np.savez(os.path.join(opts.out, f"case{i}.npz"), **arrays)
    if comm.rank == 0:
        print(json.dumps(results), flush=True)


if __name__ == "__main__":
    main()

"""Scenario: every heuristic x reconstruction on one sharded file; rank 0 writes JSON.

mpiexec -n P python -m mpi4py run_heuristics.py TRAIN TEST OUT C GAMMA
"""

import json
import sys

import numpy as np

from psvm._params import HEURISTICS, validate_svc_params
from psvm.comm import world
from psvm.io.libsvm_format import read_libsvm
from psvm.io.shard import labels_in_order, load_shard
from psvm.stats import Stats
from psvm.svc.multiclass import fit_ovo

train, test, out, C, gamma = sys.argv[1:6]
comm = world()
shard = load_shard(comm, train)
classes = np.sort(labels_in_order(comm, shard.y))
Xt, _ = read_libsvm(test, n_features=shard.n_features)
results = {}
for h in HEURISTICS:
    for rec in ("single", "multi"):
        stats = Stats()
        params = validate_svc_params(
            C=float(C), gamma=float(gamma), heuristic=h, reconstruction=rec
        )
        model, support = fit_ovo(comm, shard, params, classes, stats=stats)
        # collective assertion: every rank holds the same model
        same = comm.allgather_obj((model.rho.tolist(), support.tolist()))
        assert all(s == same[0] for s in same), f"{h}/{rec}: ranks disagree"
        results[f"{h}/{rec}"] = {
            "objective": model.meta["objective"],
            "rho": model.rho.tolist(),
            "support": support.tolist(),
            "pred": model.predict(Xt).tolist(),
            "eliminated": comm.sum_(stats.counts.get("n_eliminated", 0)),
            "lent": comm.sum_(stats.counts.get("rows_lent", 0)),
        }
if comm.rank == 0:
    with open(out, "w") as f:
        json.dump(results, f)

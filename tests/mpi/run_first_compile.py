"""A C-SVC fit whose numba cache (NUMBA_CACHE_DIR) starts empty: prints each rank's cache
misses and hits of the engine's loop (psvm.jit.compile_first_on_one_rank)."""

import numpy as np
from sklearn.datasets import load_iris

import psvm
from psvm.comm import world
from psvm.svc import engine

X, y = load_iris(return_X_y=True)
comm = world()
model = psvm.SVC(C=10.0, gamma=0.5).fit(X[y > 0], y[y > 0])
stats = engine.run.stats
misses, hits = sum(stats.cache_misses.values()), sum(stats.cache_hits.values())
for line in comm.allgather_obj(
    f"rank {comm.rank} misses {misses} hits {hits} sv {model.support_.size}"
):
    if comm.rank == 0:
        print(line, flush=True)
assert np.isfinite(model.intercept_).all()

"""MPI scenario: one rank's kernel arithmetic differs; every rank refuses to train.

Usage: mpiexec -n P python -m mpi4py run_arithmetic_probe.py

The last rank's probe is perturbed (as on a node whose exp uses fused
multiply-adds differently). Each rank prints its error on one line.
"""

from mpi4py import MPI
from sklearn.datasets import load_iris

import psvm
from psvm.svc import training

comm = MPI.COMM_WORLD
if comm.rank == comm.size - 1:
    probe = training.arithmetic_probe
    training.arithmetic_probe = lambda: probe()[:-1] + b"\x01"
X, y = load_iris(return_X_y=True)
try:
    psvm.SVC().fit(X, y)
    print(f"rank {comm.rank}: trained", flush=True)
except ValueError as e:
    print(f"rank {comm.rank}: {e}", flush=True)

"""MPI scenario: psvm-train with an unexpected failure injected on one rank.

Usage: mpiexec -n P python -m mpi4py run_train_fault.py FAULT RANK TRAIN_ARGS...

FAULT ``fit``: ``fit_ovo`` raises RuntimeError on RANK as training starts,
while the other ranks wait in the solver's first collective. FAULT ``fsync``:
``os.fsync`` raises OSError on RANK, i.e. while rank 0 is writing the model
file (after the header and the support vectors, before the rename). FAULT
``ckpt-exit``: every rank dies (``os._exit(9)``) right after the RANK-th
checkpoint is written, a crash at a known point of the run. The patch is
applied by this test script only: psvm has no fault-injection hook.
"""

import os
import sys

import psvm.svc.checkpoint
import psvm.svc.multiclass
from psvm.cli.train import main
from psvm.comm import world


def _fail(*args, **kwargs):
    raise RuntimeError(f"injected failure on rank {world().rank}")


def _fail_fsync(fd):
    raise OSError(28, "No space left on device (injected)")


def _exit_after(k):
    save, count = psvm.svc.checkpoint.Checkpoint.save, [0]

    def patched(self, *args):
        save(self, *args)
        count[0] += 1
        if count[0] == k:
            os._exit(9)

    psvm.svc.checkpoint.Checkpoint.save = patched


if __name__ == "__main__":
    fault, rank, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    if fault == "ckpt-exit":
        _exit_after(rank)
        sys.exit(main(argv))
    if world().rank == rank:
        if fault == "fit":
            psvm.svc.multiclass.fit_ovo = _fail
        elif fault == "fsync":
            os.fsync = _fail_fsync
        else:
            raise SystemExit(f"unknown fault {fault}")
    sys.exit(main(argv))

"""MPI scenario: psvm's console entry gives numpy's OpenBLAS each rank's share of the cores.

Usage: mpiexec -n P python run_blas_threads.py

Runs :func:`psvm.cli._common.run_main` as the psvm-train and psvm-predict console scripts
do (no argv: the process ends there), before anything has loaded numpy. Its body reads
every loaded OpenBLAS's thread count (threadpoolctl) on each rank; rank 0 prints them, one
list per rank, as one JSON line.
"""

import json
import sys

from psvm.cli._common import run_main


def body(argv: list[str]) -> int:
    from threadpoolctl import threadpool_info

    from psvm.comm import world

    counts = [p["num_threads"] for p in threadpool_info() if p["internal_api"] == "openblas"]
    everyone = world().allgather_obj(counts)
    if world().rank == 0:
        print(json.dumps(everyone), flush=True)
    return 0


if __name__ == "__main__":
    assert "numpy" not in sys.modules, "numpy loaded before the console entry"
    run_main("run_blas_threads", "usage: run_blas_threads.py", body, None)

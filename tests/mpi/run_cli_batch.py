"""MPI scenario: many psvm-train and psvm-predict runs in one launch (hostile input, issue
7; the model files of every svm_type and P).

Usage: mpiexec -n P python -m mpi4py run_cli_batch.py OUT_JSON ARGV_JSON

For each list ``[PROG, *argv]`` in ARGV_JSON, in order, every rank calls psvm-train's (PROG
``train``) or psvm-predict's (``predict``) ``main(argv)`` in this process
(``tests._svm.launch_cli_batch``). Rank 0's standard error is captured. A clean error
returns 1 on every rank and the loop goes on; an unexpected one aborts the whole job (the
test sees a missing JSON file). Rank 0 writes, per run, the return codes of all ranks and
its captured stderr.
"""

import contextlib
import io
import json
import sys

from psvm.cli import predict, train
from psvm.comm import world

MAINS = {"train": train.main, "predict": predict.main}


def run():
    out, argv_json = sys.argv[1:]
    with open(argv_json) as f:
        runs = [(" ".join(argv), argv) for argv in json.load(f)]
    comm = world()
    results = []
    for case, argv in runs:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = MAINS[argv[0]](argv[1:])
        codes = comm.allgather_obj(rc)
        results.append({"case": case, "codes": codes, "stderr": err.getvalue()})
    if comm.rank == 0:
        with open(out, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    run()

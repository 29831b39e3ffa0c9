"""MPI scenario: many psvm-train and psvm-predict runs in one launch (hostile input, issue
7; the model files of every svm_type and P).

Usage: mpiexec -n P python -m mpi4py run_cli_batch.py OUT_JSON CASE_DIR...
       mpiexec -n P python -m mpi4py run_cli_batch.py OUT_JSON --argv ARGV_JSON

For each case directory (holding ``data.txt``) every rank calls
``psvm.cli.train.main(["-q", data.txt, case/data.model])`` in this process, or, with
``--argv``, for each list ``[PROG, *argv]`` in ARGV_JSON, in order, psvm-train's (PROG
``train``) or psvm-predict's (``predict``) ``main(argv)``. Rank 0's standard error is
captured. A clean error returns 1 on every rank and the loop goes on; an unexpected one
aborts the whole job (the test sees a missing JSON file). Rank 0 writes, per case, the
return codes of all ranks and its captured stderr.
"""

import contextlib
import io
import json
import os
import sys

from psvm.cli import predict, train
from psvm.comm import world

MAINS = {"train": train.main, "predict": predict.main}


def run():
    out, cases = sys.argv[1], sys.argv[2:]
    if cases[:1] == ["--argv"]:  # (case name, argv): the argument lists
        with open(cases[1]) as f:
            runs = [(" ".join(argv), argv) for argv in json.load(f)]
    else:
        runs = [
            (c, ["train", "-q", os.path.join(c, "data.txt"), os.path.join(c, "data.model")])
            for c in cases
        ]
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

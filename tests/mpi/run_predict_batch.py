"""MPI scenario: many psvm-predict runs in one launch.

Usage: mpiexec -n P python -m mpi4py run_predict_batch.py CASES_JSON OUT_JSON

CASES_JSON holds a list of psvm-predict argument lists. Every rank calls
``psvm.cli.predict.main(argv)`` for each in this process, its standard output
and error captured. A clean error returns 1 on every rank and the loop goes
on; an unexpected one aborts the whole job (the test sees no OUT_JSON). Rank 0
writes, per case, every rank's return code, stdout and stderr.
"""

import contextlib
import io
import json
import sys

from psvm.cli.predict import main
from psvm.comm import world


def run():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    comm = world()
    results = []
    for argv in cases:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
        results.append(
            {
                "argv": argv,
                "codes": comm.allgather_obj(rc),
                "stdout": comm.allgather_obj(out.getvalue()),
                "stderr": comm.allgather_obj(err.getvalue()),
            }
        )
    if comm.rank == 0:
        with open(sys.argv[2], "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    run()

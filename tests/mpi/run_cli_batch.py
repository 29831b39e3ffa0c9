"""MPI scenario: many psvm-train runs in one launch (hostile input, issue 7).

Usage: mpiexec -n P python -m mpi4py run_cli_batch.py OUT_JSON CASE_DIR...

For each case directory (holding ``data.txt``) every rank calls
``psvm.cli.train.main(["-q", data.txt, case/data.model])`` in this process,
with rank 0's standard error captured. A clean error returns 1 on every rank
and the loop goes on; an unexpected one aborts the whole job (the test sees a
missing JSON file). Rank 0 writes, per case, the return codes of all ranks and
its captured stderr.
"""

import contextlib
import io
import json
import os
import sys

from psvm.cli.train import main
from psvm.comm import world


def run():
    out, cases = sys.argv[1], sys.argv[2:]
    comm = world()
    results = []
    for case in cases:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = main(["-q", os.path.join(case, "data.txt"), os.path.join(case, "data.model")])
        codes = comm.allgather_obj(rc)
        results.append({"case": case, "codes": codes, "stderr": err.getvalue()})
    if comm.rank == 0:
        with open(out, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    run()

"""MPI scenario: rank 0 fails after the other ranks have finished.

Usage: mpiexec -n P python run_late_abort.py DELAY

Rank 0 raises inside ``Comm.guard`` DELAY seconds after entering it; the other ranks leave
it at once and end as psvm's commands do (:func:`~psvm.comm.process.end_process`:
MPI_Finalize, then exit). Rank 0's MPI_Abort must end them in MPI_Finalize too.
"""

import sys
import time

from psvm.comm import world
from psvm.comm.process import end_process

comm = world()
with comm.guard("late"):
    if comm.rank == 0:
        time.sleep(float(sys.argv[1]))
        raise RuntimeError("injected failure on rank 0 after the others finished")
end_process(0)

"""Latency of the solver's collective, called from compiled code, for P ranks.

    python benchmarks/collective_latency.py --ranks 1,2,3,4 --floats 40,200,1000

Launches ``mpiexec -n P`` (no environment overrides) and, in every rank, times
``--calls`` calls of :func:`psvm.comm.compiled.allgather` of ``--floats``
float64 per rank (an SMO packet is 10 + 2 x the longest row floats) inside one
numba loop, and the same through mpi4py's ``Allgather`` from Python. Rank 0
prints µs per call (the slowest rank's mean). More ranks than cores are
oversubscribed: the table says so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

WORKER = r"""
import json, sys, time
import numpy as np
from numba import njit
from psvm.comm import Comm
from psvm.comm.compiled import allgather

@njit
def loop(mpi, send, recv, calls):
    for k in range(calls):
        send[0] = k
        allgather(mpi, send, recv)
    return recv[0, 0]

comm = Comm()
floats, calls = int(sys.argv[1]), int(sys.argv[2])
send, recv = np.zeros(floats), np.zeros((comm.size, floats))
mpi = comm.compiled()
loop(mpi, send, recv, 10)
out = {}
for name in ("compiled", "mpi4py"):
    t = time.perf_counter()
    if name == "compiled":
        loop(mpi, send, recv, calls)
    else:
        for k in range(calls):
            comm.allgather_into(send, recv)
    us = (time.perf_counter() - t) / calls * 1e6
    out[name] = float(comm.max_(us))
if comm.rank == 0:
    print(json.dumps(out))
"""


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="1,2,3,4")
    ap.add_argument("--floats", default="40,200,1000")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--json", default="benchmarks/results/collective_latency.json")
    args = ap.parse_args(argv)
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    cores = len(os.sched_getaffinity(0))
    rows = []
    print(f"# {cores} cores; µs per allgather, slowest rank's mean over {args.calls} calls")
    print(f"{'P':>3} {'floats':>7} {'compiled µs':>12} {'mpi4py µs':>10}  note")
    for p in map(int, args.ranks.split(",")):
        for f in map(int, args.floats.split(",")):
            cmd = [mpiexec, "-n", str(p), sys.executable, "-c", WORKER, str(f), str(args.calls)]
            r = subprocess.run(cmd, capture_output=True, text=True, check=True)
            res = json.loads(r.stdout.strip().splitlines()[-1])
            note = "oversubscribed" if p > cores else ""
            rows.append({"P": p, "floats": f, **res, "oversubscribed": p > cores})
            print(f"{p:>3} {f:>7} {res['compiled']:>12.2f} {res['mpi4py']:>10.2f}  {note}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"cores": cores, "time": time.time(), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()

"""Peak memory per rank of psvm-train under mpiexec -n P (issue 7, docs/reliability.md).

    python benchmarks/memory.py [--data ijcnn1.t.xz] [--ranks 1,2,4] [--cache 100] [--max-iter 3000]

Each rank runs ``psvm.cli.train.main`` inside a small launcher (this file with
``--rank``) that records its resident set after importing psvm (the baseline:
Python, numpy, scipy, numba, mpi4py) and its peak (``VmHWM`` from /proc, the
same as ``ru_maxrss``) at the end. ``--max-iter`` bounds the run time: by then
the kernel cache is full, so the peak is the steady state. The file is
decompressed once beforehand, so decompression is not measured.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile


def _status_kb(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def rank_main(argv: list[str]) -> int:
    """Inside mpiexec: run psvm-train, print one JSON line with this rank's memory."""
    import numba  # noqa: F401  (everything the run imports, for the baseline)
    import scipy.sparse  # noqa: F401

    import psvm.io.shard
    import psvm.svc.multiclass  # noqa: F401
    from psvm.cli import train
    from psvm.comm import world

    comm = world()
    baseline = _status_kb("VmRSS")
    rc = train.main(argv)
    peak = _status_kb("VmHWM")
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    row = {
        "rank": comm.rank,
        "size": comm.size,
        "rc": rc,
        "baseline_kb": baseline,
        "peak_kb": peak,
        "ru_maxrss_kb": maxrss,
    }
    rows = comm.allgather_obj(row)
    if comm.rank == 0:
        print("MEMORY " + json.dumps(rows), flush=True)
    return rc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="ijcnn1.t.xz", help="file in $PSVM_SHARED_DATA")
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--cache", type=float, default=100.0, help="-m, MB per rank")
    ap.add_argument("--max-iter", type=int, default=3000)
    ap.add_argument(
        "--rows",
        type=int,
        default=0,
        help="train on the first N rows only (N small: the fixed per-rank cost)",
    )
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    opts, rest = ap.parse_known_args()
    if opts.rank:
        sys.exit(rank_main(rest))

    from heuristics.bench import data_dir, head_path, mpiexec
    from psvm.io.libsvm_format import read_libsvm, uncompressed_path

    src = str(data_dir() / opts.data)
    raw = uncompressed_path(src)  # decompress once, outside the measurement
    if opts.rows:
        raw = head_path(src, opts.rows)
    X, y = read_libsvm(raw)
    csr_mb = (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20
    print(
        f"data {opts.data}: {X.shape[0]} rows, {X.shape[1]} features, nnz {X.nnz}, "
        f"CSR {csr_mb:.1f} MB (float64 data, int32 indices, int64 indptr); "
        f"cache -m {opts.cache:g} MB/rank"
    )
    del X, y
    print("| P | rank | baseline MB | peak MB | peak - baseline MB |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    env = dict(os.environ)  # as users run it: no thread overrides
    for p in [int(v) for v in opts.ranks.split(",")]:
        with tempfile.TemporaryDirectory() as d:
            cmd = [
                mpiexec(),
                "-n",
                str(p),
                sys.executable,
                os.path.abspath(__file__),
                "--rank",
                "-q",
                "-m",
                str(opts.cache),
                "--max-iter",
                str(opts.max_iter),
                raw,
                os.path.join(d, "m.model"),
            ]
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        lines = [s for s in r.stdout.splitlines() if s.startswith("MEMORY ")]
        if r.returncode != 0 or not lines:
            sys.exit(f"P={p} failed ({r.returncode}):\n{r.stderr[-2000:]}")
        for row in json.loads(lines[0][7:]):
            b, pk = row["baseline_kb"] / 1024, row["peak_kb"] / 1024
            print(f"| {p} | {row['rank']} | {b:.0f} | {pk:.0f} | {pk - b:.0f} |", flush=True)


if __name__ == "__main__":
    main()

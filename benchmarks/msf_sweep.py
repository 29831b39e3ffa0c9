"""Time split and accuracy of parallel SGD per sync period and rank count (the MSF sweep).

    python benchmarks/msf_sweep.py --ranks 1,2 --epochs 5 --validation ijcnn1.t --out sweep ijcnn1

Reproduces the study of Abeykoon, Fox and Kim (arXiv 1905.01219): for every
P, one ``mpiexec -n P`` job loads the data once and trains with each period
(1, 2, 4, ..., 4096 local samples between model averages) for a fixed number
of epochs. Times are the slowest rank's (``comm_min_s``: the communication
time of the rank that waited least, close to the Allreduce's own cost). It
writes ``DIR/msf_sweep.csv`` and, with matplotlib,
``DIR/msf_time_split.png`` and ``DIR/msf_accuracy.png``. With P = 1 there is
nothing to average, so one run stands for every period.

A measurement of the SGD solver, not part of the library: it re-launches this
script with ``--worker`` under ``mpiexec -n P`` for every P.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

from psvm.cli._common import HelpRequested, UsageError, number, run_main, usage

FLAGS = {
    "--ranks": ("ranks", str, "comma-separated process counts (default 1,2)"),
    "--periods": ("periods", str, "comma-separated sync periods (default 1,2,4,...,4096)"),
    "--epochs": ("epochs", int, "epochs per run (default 5)"),
    "--lambda": ("alpha", float, "regularisation lambda (default 1/n)"),
    "--schedule": ("learning_rate", str, "optimal (default), pegasos, constant or epoch"),
    "--average": ("average", int, "1 (default): averaged model, 0: last iterate"),
    "--seed": ("seed", int, "seed of the shuffles (default 0)"),
    "--validation": ("validation", str, "LIBSVM test file for the accuracy column"),
    "--out": ("out", str, "output directory (default msf_sweep)"),
}
PROG = "msf_sweep.py"
USAGE = usage(f"Usage: python benchmarks/{PROG} [options] training_set_file", FLAGS)
COLUMNS = [
    "ranks",
    "period",
    "epochs",
    "n_sync",
    "bytes_sync",
    "compute_s",
    "pack_s",
    "comm_s",
    "comm_min_s",
    "eval_s",
    "train_s",
    "comm_share",
    "objective",
    "accuracy",
]


class SweepError(RuntimeError):
    """A worker job failed; its stderr is in the message."""

    collective = True  # the parent is a single process: print and exit 1, no abort


def parse_args(argv: list[str]) -> dict:
    opts: dict = {"worker": False}
    k = 0
    while k < len(argv) and argv[k].startswith("--"):
        if argv[k] == "--worker":
            opts["worker"] = True
            k += 1
            continue
        if argv[k] in ("--help", "-h"):
            raise HelpRequested()
        if argv[k] not in FLAGS or k + 1 >= len(argv):
            raise UsageError(f"unknown option or missing value: {argv[k]}")
        name, kind, _ = FLAGS[argv[k]]
        opts[name] = number(argv[k], argv[k + 1], kind) if kind in (int, float) else argv[k + 1]
        k += 2
    if len(argv) - k != 1:
        raise UsageError("expected one training_set_file")
    opts["train"] = argv[k]
    ints = lambda flag, text: [number(flag, t, int) for t in text.split(",") if t]  # noqa: E731
    opts["ranks"] = ints("--ranks", opts.get("ranks", "1,2"))
    opts["periods"] = ints("--periods", opts.get("periods", ",".join(str(2**i) for i in range(13))))
    if not opts["ranks"] or min(opts["ranks"]) < 1 or min(opts["periods"], default=0) < 1:
        raise UsageError("--ranks and --periods need positive integers")
    return opts


def _worker(opts: dict) -> int:
    """One mpiexec job: load once, train with every period, print JSON lines on rank 0."""
    import numpy as np

    from psvm._params import validate_sgd_params
    from psvm.comm import world
    from psvm.io.shard import labels_in_order, load_shard
    from psvm.sgd.model import to_width
    from psvm.sgd.msf import FixedPeriod
    from psvm.sgd.problem import SGDState, make_problem
    from psvm.sgd.trainer import SGDTrainer
    from psvm.stats import Stats, reduce_stats

    comm = world()
    shard = load_shard(comm, opts["train"])
    classes = np.sort(labels_in_order(comm, shard.y))
    codes = np.searchsorted(classes, shard.y)
    validation = None
    if "validation" in opts:
        vs = load_shard(comm, opts["validation"], min_classes=0)  # any width, as psvm-train's
        vcodes = np.searchsorted(classes, vs.y)
        vcodes[classes[np.minimum(vcodes, classes.size - 1)] != vs.y] = -1
        validation = (to_width(vs.X, shard.n_features), vcodes, None)
    prob = make_problem(comm, shard.X, codes, classes.size, validation=validation)
    cfg = validate_sgd_params(
        alpha=opts.get("alpha", 1.0 / shard.n_samples),
        learning_rate=opts.get("learning_rate", "optimal"),
        average=opts.get("average", 1),
        tol=None,
        intercept_decay=0.01,
        max_iter=opts.get("epochs", 5),
    )
    periods = opts["periods"] if comm.size > 1 else opts["periods"][:1]
    for period in periods:
        stats = Stats()
        state = SGDState.zeros(prob.n_models, prob.n_features, opts.get("seed", 0), comm.rank)
        trainer = SGDTrainer(comm, prob, cfg, state, FixedPeriod(period), stats)
        trainer.run(cfg.max_iter, stop_on_tol=False)
        r = reduce_stats(comm, stats)
        sec, c = r["seconds_max"], r["counts"]
        train_s = sec.get("epochs", 0.0)
        row = dict(
            ranks=comm.size,
            period=period,
            epochs=c["n_iter"],
            n_sync=c.get("n_sync", 0),
            bytes_sync=c.get("bytes_sync", 0),
            compute_s=sec.get("compute", 0.0),
            pack_s=sec.get("pack", 0.0),
            comm_s=sec.get("comm", 0.0),
            comm_min_s=min(pr["seconds"].get("comm", 0.0) for pr in r["per_rank"]),
            eval_s=sec.get("objective", 0.0) + sec.get("comm_eval", 0.0),
            train_s=train_s,
            comm_share=sec.get("comm", 0.0) / train_s if train_s else 0.0,
            objective=state.objectives[-1],
            accuracy=stats.traces["val_accuracy"][-1],
        )
        if comm.rank == 0:
            print(json.dumps(row), flush=True)
    return 0


def _run_worker(argv: list[str], n: int) -> list[dict]:
    from heuristics.bench import mpiexec

    try:
        exe = mpiexec()
    except RuntimeError as e:
        raise UsageError(str(e)) from None
    script = os.path.abspath(__file__)
    cmd = [exe, "-n", str(n), sys.executable, script, "--worker", *argv]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SweepError(f"mpiexec -n {n} worker failed:\n{r.stderr[-2000:]}")
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def write_csv(path: str, rows: list[dict]) -> None:
    from psvm.io.atomic import write_atomic

    with write_atomic(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for row in rows:
            w.writerow({k: row[k] for k in COLUMNS})


def plot(rows: list[dict], out: str, title: str) -> list[str]:
    """Time split (stacked bars per period, one panel per P > 1) and accuracy per period."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ranks = sorted({r["ranks"] for r in rows if r["ranks"] > 1})
    files = []
    if ranks:
        fig, axes = plt.subplots(2, len(ranks), figsize=(6.5 * len(ranks), 8), squeeze=False)
        for col, p in enumerate(ranks):
            rs = sorted((r for r in rows if r["ranks"] == p), key=lambda r: r["period"])
            x = list(range(len(rs)))
            comp = [r["compute_s"] + r["pack_s"] for r in rs]
            comm = [r["comm_s"] for r in rs]
            other = [max(r["train_s"] - c - m, 0.0) for r, c, m in zip(rs, comp, comm, strict=True)]
            total = [c + m + o for c, m, o in zip(comp, comm, other, strict=True)]
            for row, scale, unit in ((0, [1.0] * len(rs), "s"), (1, total, "%")):
                ax = axes[row][col]
                f = [100.0 / t if unit == "%" else 1.0 for t in scale]
                parts = [
                    ("computation (steps + packing)", comp),
                    ("communication (Allreduce, incl. waiting)", comm),
                    ("objective evaluation and the rest", other),
                ]
                bottom = [0.0] * len(rs)
                for label, vals in parts:
                    v = [a * b for a, b in zip(vals, f, strict=True)]
                    ax.bar(x, v, bottom=bottom, label=label)
                    bottom = [a + b for a, b in zip(bottom, v, strict=True)]
                ax.set_xticks(x, [str(r["period"]) for r in rs], rotation=45)
                ax.set_xlabel("sync period (local samples between model averages)")
                ax.set_ylabel(
                    "training time, slowest rank (s)"
                    if unit == "s"
                    else "share of training time (%)"
                )
                ax.set_title(f"{title}, P = {p}: " + ("time split" if unit == "s" else "shares"))
                ax.legend(fontsize=8)
        fig.tight_layout()
        files.append(os.path.join(out, "msf_time_split.png"))
        fig.savefig(files[-1], dpi=110)
        plt.close(fig)
    fig, ax1 = plt.subplots(figsize=(7, 4.2))
    ax2 = ax1.twinx()
    for p in sorted({r["ranks"] for r in rows}):
        rs = sorted((r for r in rows if r["ranks"] == p), key=lambda r: r["period"])
        if p == 1:
            ax1.axhline(100 * rs[0]["accuracy"], color="k", ls=":", label="P = 1 (sequential)")
            continue
        per = [r["period"] for r in rs]
        ax1.plot(per, [100 * r["accuracy"] for r in rs], "o-", label=f"accuracy, P = {p}")
        ax2.plot(
            per,
            [100 * r["comm_share"] for r in rs],
            "s--",
            alpha=0.6,
            label=f"communication share, P = {p}",
        )
    accs = [100 * r["accuracy"] for r in rows]
    mid = (max(accs) + min(accs)) / 2  # at least +-1 point: flat must look flat
    half = max(1.0, (max(accs) - min(accs)) / 2 + 0.2)
    ax1.set_ylim(mid - half, mid + half)
    ax2.set_ylim(0, 100)
    ax1.set_xscale("log", base=2)
    ax1.set_xlabel("sync period (local samples between model averages)")
    ax1.set_ylabel("test accuracy (%)")
    ax2.set_ylabel("communication share of training time (%)")
    ax1.set_title(f"{title}: accuracy and communication share per period")
    h1, l1 = ax1.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax1.legend(h1 + h2, l1 + l2, fontsize=8, loc="lower left")
    fig.tight_layout()
    files.append(os.path.join(out, "msf_accuracy.png"))
    fig.savefig(files[-1], dpi=120)
    plt.close(fig)
    return files


def _body(argv: list[str]) -> int:
    opts = parse_args(argv)
    if opts["worker"]:
        return _worker(opts)
    if "validation" not in opts:
        raise UsageError("--validation is required (the accuracy column)")
    out = opts.get("out", "msf_sweep")
    os.makedirs(out, exist_ok=True)
    worker_argv = [a for a in argv if a != "--worker"]
    rows = []
    for n in opts["ranks"]:
        got = _run_worker(worker_argv, n)
        rows += got
        for r in got:
            print(
                f"P={r['ranks']} period={r['period']:>5} syncs={r['n_sync']:>7} "
                f"train={r['train_s']:.3f}s comm={r['comm_s']:.3f}s "
                f"({100 * r['comm_share']:.1f}%) acc={100 * r['accuracy']:.2f}%",
                flush=True,
            )
    path = os.path.join(out, "msf_sweep.csv")
    write_csv(path, rows)
    print(f"wrote {path}")
    try:
        files = plot(rows, out, os.path.basename(opts["train"]).split(".")[0])
        print("wrote " + ", ".join(files))
    except ImportError:
        print("matplotlib not installed: no plots (pip install psvm[plot])")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_main(PROG, USAGE, _body, argv)


if __name__ == "__main__":
    sys.exit(main())

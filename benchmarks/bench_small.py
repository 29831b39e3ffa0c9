"""Small problems in one process: psvm.SVC against scikit-learn's SVC, the same parameters.

    python benchmarks/bench_small.py --repeat 3
    python benchmarks/bench_small.py --only iris,heart_scale --repeat 1
    python benchmarks/bench_small.py --repeat 3 --steady 300

What a scikit-learn user sees on small data: ``psvm.SVC(...).fit(X, y)`` in
one process (no mpiexec, no environment overrides: numba uses its default
threads) against ``sklearn.svm.SVC(...).fit(X, y)`` with the same C, kernel,
gamma, degree, tol and cache size. Each problem gets one warm-up fit of each
(numba compilation or cache loading happens there), then ``--repeat`` timed
fits alternating psvm / scikit-learn; the fastest of each counts. Ratio is
scikit-learn ms / psvm ms (above 1: psvm faster); the geometric mean is over
the rows shown. ``--steady N`` then alternates up to N more fits of each (5 s a
problem at most) and reports the ratio of their medians: on the tiny sets a
best of 3 right after the warm-up reads the interpreter's warm-up too (the
first fits of a process run slower, psvm's more: more of its fit is Python),
and iris's best of 3 spread over 0.93-1.21 in six fresh processes where the
medians of fits 12-41 read 1.03 (session 28). iris poly depended on the process until
session 48 (its engine read about 5.5 ms in two loads of the compiled code out of three and
6.7-8.5 ms in the others); a small window's plain iterations now run in a loop with one
speed in nearly every load (docs/performance.md, sessions 47-48).
Iterations are the sums of ``n_iter_`` over the one-vs-one pairs. ``agree`` is the share of
training rows on which the two predict the same class, next to each one's training accuracy,
so that a fast wrong result shows.

Toy sets come from ``sklearn.datasets``; LIBSVM sets are read from
``$PSVM_SHARED_DATA`` (default ``../shared/data``), decompressed in memory and
passed as the CSR matrices ``load_svmlight_file`` gives. The last row times a
``GridSearchCV`` (n_jobs=1, 5 C x 4 gamma x cv=3 = 60 fits) on digits.
"""

from __future__ import annotations

import argparse
import io
import json
import lzma
import math
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from heuristics.bench import data_dir, machine, versions, write_output
from heuristics.report.text import markdown_table

RESULTS = Path(__file__).resolve().parent / "results"
GRID = {"C": [0.1, 1.0, 10.0, 100.0, 1000.0], "gamma": [0.01, 0.03, 0.1, 0.3]}
GRID_NAME = "GridSearchCV digits (60 fits)"
# --steady's time per problem: hundreds of fits of the tiny sets, a few of the larger ones
STEADY_SECONDS = 5.0


@dataclass
class Problem:
    name: str
    load: object  # () -> (X, y)
    params: dict = field(default_factory=dict)


def libsvm(name: str, rows: int | None = None):
    """A LIBSVM file from the shared data folder, decompressed in memory, as CSR with 32-bit
    indices (scikit-learn's SVC refuses the 64-bit ones ``load_svmlight_file`` may give)."""

    def load():
        import scipy.sparse as sp
        from sklearn.datasets import load_svmlight_file

        with lzma.open(data_dir() / f"{name}.xz") as f:
            X, y = load_svmlight_file(io.BytesIO(f.read()), zero_based=False)
        if rows:
            X, y = X[:rows], y[:rows]
        X = sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), X.shape)
        return X, y

    return load


def toy(name: str, scale: bool = False, divide: float = 1.0):
    def load():
        import sklearn.datasets as ds

        X, y = getattr(ds, f"load_{name}")(return_X_y=True)
        X = X / divide
        if scale:
            from sklearn.preprocessing import StandardScaler

            X = StandardScaler().fit_transform(X)
        return X, y

    return load


def classification():
    from sklearn.datasets import make_classification

    return make_classification(5000, 20, n_informative=10, random_state=0)


PROBLEMS = [
    Problem("iris", toy("iris")),
    Problem("iris poly", toy("iris"), {"kernel": "poly", "gamma": 1.0}),
    Problem("digits /16", toy("digits", divide=16.0)),
    Problem("breast_cancer std", toy("breast_cancer", scale=True)),
    Problem("wine std", toy("wine", scale=True)),
    Problem("heart_scale", libsvm("heart_scale")),
    Problem("diabetes_scale", libsvm("diabetes_scale")),
    Problem("german.numer_scale", libsvm("german.numer_scale")),
    Problem("a9a 5000", libsvm("a9a", 5000), {"C": 100.0, "gamma": 0.05}),
    Problem("make_classification", classification, {"C": 10.0}),
    Problem("australian_scale", libsvm("australian_scale")),
    Problem("splice", libsvm("splice")),
    Problem("mushrooms", libsvm("mushrooms")),
    Problem("phishing", libsvm("phishing")),
    Problem("usps.t", libsvm("usps.t")),
]


def estimators(params: dict):
    import sklearn.svm

    import psvm

    full = {"C": 1.0, "gamma": "scale", **params}
    return psvm.SVC(**full), sklearn.svm.SVC(**full), full


def timed(fit) -> float:
    t = time.perf_counter()
    fit()
    return time.perf_counter() - t


def run_problem(p: Problem, repeat: int, steady: int = 0) -> dict:
    X, y = p.load()
    ours, ref, full = estimators(p.params)
    ours.fit(X, y)  # warm-up: numba compilation / cache load
    ref.fit(X, y)
    t_ours, t_ref = [], []
    for _ in range(repeat):
        t_ours.append(timed(lambda: ours.fit(X, y)))
        t_ref.append(timed(lambda: ref.fit(X, y)))
    s_ours, s_ref = [], []  # then the steady state: more alternated fits, within STEADY_SECONDS
    budget = time.perf_counter() + STEADY_SECONDS
    while len(s_ours) < steady and time.perf_counter() < budget:
        s_ours.append(timed(lambda: ours.fit(X, y)))
        s_ref.append(timed(lambda: ref.fit(X, y)))
    p_ours, p_ref = ours.predict(X), ref.predict(X)
    return {
        "problem": p.name,
        "n": int(X.shape[0]),
        "d": int(X.shape[1]),
        "classes": int(np.unique(y).size),
        "X": "csr" if hasattr(X, "tocsr") else "dense",
        "params": full,
        "sklearn_ms": 1e3 * min(t_ref),
        "psvm_ms": 1e3 * min(t_ours),
        "sklearn_all_ms": [1e3 * t for t in t_ref],
        "psvm_all_ms": [1e3 * t for t in t_ours],
        "steady_fits": len(s_ours),
        "sklearn_steady_ms": 1e3 * float(np.median(s_ref)) if s_ref else None,
        "psvm_steady_ms": 1e3 * float(np.median(s_ours)) if s_ours else None,
        "sklearn_iter": int(np.sum(ref.n_iter_)),
        "psvm_iter": int(np.sum(ours.n_iter_)),
        "sklearn_nsv": int(ref.n_support_.sum()),
        "psvm_nsv": int(ours.n_support_.sum()),
        "sklearn_acc": float(np.mean(p_ref == y)),
        "psvm_acc": float(np.mean(p_ours == y)),
        "agree": float(np.mean(p_ours == p_ref)),
    }


def run_grid(repeat: int) -> dict:
    import sklearn.svm
    from sklearn.model_selection import GridSearchCV

    import psvm

    X, y = toy("digits", divide=16.0)()
    psvm.SVC().fit(X, y)  # warm-up of the solver (compiled or loaded once per process)
    sklearn.svm.SVC().fit(X, y)
    t_ours, t_ref = [], []
    for _ in range(repeat):
        g_ours = GridSearchCV(psvm.SVC(), GRID, cv=3, n_jobs=1)
        g_ref = GridSearchCV(sklearn.svm.SVC(), GRID, cv=3, n_jobs=1)
        t_ours.append(timed(lambda g=g_ours: g.fit(X, y)))
        t_ref.append(timed(lambda g=g_ref: g.fit(X, y)))
    fits = len(GRID["C"]) * len(GRID["gamma"]) * 3
    s_ours, s_ref = g_ours.cv_results_["mean_test_score"], g_ref.cv_results_["mean_test_score"]
    return {
        "problem": GRID_NAME,
        "n": int(X.shape[0]),
        "d": int(X.shape[1]),
        "classes": int(np.unique(y).size),
        "X": "dense",
        "params": {"grid": GRID, "cv": 3, "n_jobs": 1, "fits": fits},
        "sklearn_ms": 1e3 * min(t_ref),
        "psvm_ms": 1e3 * min(t_ours),
        "sklearn_all_ms": [1e3 * t for t in t_ref],
        "psvm_all_ms": [1e3 * t for t in t_ours],
        "sklearn_iter": None,
        "psvm_iter": None,
        # agreement: same best parameters, and the largest gap in mean CV score over the grid
        "sklearn_best": g_ref.best_params_,
        "psvm_best": g_ours.best_params_,
        "sklearn_acc": float(g_ref.best_score_),
        "psvm_acc": float(g_ours.best_score_),
        "agree": float(g_ours.best_params_ == g_ref.best_params_),
        "max_cv_score_gap": float(np.max(np.abs(s_ours - s_ref))),
    }


def _ms(x: float) -> str:
    return f"{x:.1f}" if x < 100 else f"{x:.0f}"


def _i(x) -> str:
    return "-" if x is None else str(x)


HEADER = [
    "problem",
    "n",
    "X",
    "sklearn ms",
    "psvm ms",
    "sklearn/psvm",
    "steady (fits)",
    "iter sklearn",
    "iter psvm",
    "acc sklearn",
    "acc psvm",
    "agree",
]


def _steady(r: dict) -> str:
    """The ratio of the steady fits' medians, and how many fits each tool made ('-': none)."""
    if not r.get("steady_fits"):
        return "-"
    return f"{r['sklearn_steady_ms'] / r['psvm_steady_ms']:.2f} ({r['steady_fits']})"


def cells(r: dict) -> list[str]:
    if r["problem"] == GRID_NAME:
        agree = "best params " + ("same" if r["agree"] else "DIFFER")
        agree += f", max CV gap {r['max_cv_score_gap']:.4f}"
    else:
        agree = f"{100 * r['agree']:.2f}%"
    return [
        r["problem"],
        str(r["n"]),
        r["X"],
        _ms(r["sklearn_ms"]),
        _ms(r["psvm_ms"]),
        f"{r['sklearn_ms'] / r['psvm_ms']:.2f}",
        _steady(r),
        _i(r["sklearn_iter"]),
        _i(r["psvm_iter"]),
        f"{100 * r['sklearn_acc']:.2f}",
        f"{100 * r['psvm_acc']:.2f}",
        agree,
    ]


def gmean_ratio(rows: list[dict]) -> float:
    return math.exp(np.mean([math.log(r["sklearn_ms"] / r["psvm_ms"]) for r in rows]))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [q.name for q in PROBLEMS] + [GRID_NAME]
    p.add_argument("--repeat", type=int, default=3, help="timed fits of each (best counts)")
    p.add_argument(
        "--steady",
        type=int,
        default=0,
        help=f"then up to this many more alternated fits (within {STEADY_SECONDS:g} s a "
        "problem): the ratio of their medians",
    )
    p.add_argument(
        "--only",
        default=None,
        help="comma-separated problem names (or unique prefixes): " + "; ".join(names),
    )
    p.add_argument("--md", default=str(RESULTS / "small.md"), help="markdown table ('' : none)")
    p.add_argument("--json", default=str(RESULTS / "small.json"), help="JSON results ('' : none)")
    a = p.parse_args(argv)
    chosen = names
    if a.only:
        chosen = []
        for want in a.only.split(","):
            hit = [n for n in names if n == want] or [n for n in names if n.startswith(want)]
            if len(hit) != 1:
                p.error(f"--only {want!r}: matches {hit or 'nothing'}; names: {names}")
            chosen.append(hit[0])
    mach, ver = machine(), versions()
    print(
        f"# {mach['cpu']}, {mach['cores']} cores, load {mach['load_avg']}, "
        f"best of {a.repeat} after 1 warm-up",
        flush=True,
    )
    widths = [24, 6, 5, 10, 9, 12, 13, 12, 9, 11, 8, 6]
    print(
        " ".join(
            f"{h:>{w}s}" if k else f"{h:{w}s}"
            for k, (h, w) in enumerate(zip(HEADER, widths, strict=True))
        ),
        flush=True,
    )
    rows = []
    for name in chosen:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if name == GRID_NAME:
                r = run_grid(a.repeat)
            else:
                problem = next(q for q in PROBLEMS if q.name == name)
                r = run_problem(problem, a.repeat, a.steady)
        r["warnings"] = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
        rows.append(r)
        c = cells(r)
        print(
            " ".join(
                f"{x:>{w}s}" if k else f"{x:{w}s}"
                for k, (x, w) in enumerate(zip(c, widths, strict=True))
            ),
            flush=True,
        )
        for w in r["warnings"]:
            print(f"    warning: {w}", flush=True)
    g = gmean_ratio(rows)
    print(f"geometric mean of sklearn/psvm over {len(rows)} rows: {g:.2f}")
    if a.json:
        doc = {
            "argv": sys.argv,
            "repeat": a.repeat,
            "steady": a.steady,
            "machine": mach,
            "versions": ver,
            "geometric_mean_ratio": g,
            "rows": rows,
        }
        write_output(a.json, json.dumps(doc, indent=1, default=str))
    if a.md:
        body = [cells(r) for r in rows]
        body.append(["geometric mean", "", "", "", "", f"**{g:.2f}**", "", "", "", "", "", ""])
        head = [
            f"Best of {a.repeat} fits after one warm-up, one process, {mach['cpu']}, "
            f"{mach['cores']} cores; psvm {ver['psvm git']}. Ratio above 1: psvm faster. "
            "agree: training rows on which both predict the same class."
            + (
                f" steady: the ratio of medians over up to {a.steady} more alternated fits "
                f"({STEADY_SECONDS:g} s a problem at most; their count in brackets)."
                if a.steady
                else ""
            ),
            "",
        ]
        write_output(a.md, "\n".join(head + markdown_table(HEADER, body)))


if __name__ == "__main__":
    main()

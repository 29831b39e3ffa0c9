"""MPI scenario: replicated input must be the same on every rank, compared exactly.

Usage: mpiexec -n 3 python run_replicated.py

For psvm.SVC and psvm.SGDSVC (distributed='replicated'), the last ranks alter
their copy of the input: X scaled by 1 + k * 6e-10 on rank k (the old check,
sums equal within 1e-9, let rank 1 go on while rank 0 raised: a hang), X
changed in its last bit, two labels swapped (same counts), one sample weight
changed; then the last rank fits with other parameters, then with DataFrames whose
columns it names otherwise. Every rank must raise the same ValueError; the
unaltered input fits, with numeric labels and with strings (the digest hashes the
labels' class codes).
Collective assertions; rank 0 prints one JSON line: case -> error (or "ok").
"""

import json
from functools import partial

import numpy as np
from sklearn.datasets import make_blobs

import psvm
from psvm.comm import world


def main():
    comm = world()
    X, y = make_blobs(n_samples=120, centers=2, n_features=3, random_state=0)
    sw = np.ones(y.size)
    k = comm.rank
    last = k == comm.size - 1
    cases = {
        "same": (X, y, sw),
        "same, string labels": (X, np.array(["no", "yes"])[y], sw),
        "swapped string labels": (X, np.array(["no", "yes"])[_swap(y, last)], sw),
        "sum within 1e-9": (X * (1 + k * 6e-10), y, sw),
        "last bit": (
            np.where(last & (np.arange(X.size) == 7).reshape(X.shape), np.nextafter(X, np.inf), X),
            y,
            sw,
        ),
        "swapped labels": (X, _swap(y, last), sw),
        "one weight": (X, y, np.where(last & (np.arange(y.size) == 3), 2.0, sw)),
        "NaN on the last rank": (
            np.where(last & (np.arange(X.size) == 7).reshape(X.shape), np.nan, X),
            y,
            sw,
        ),
        "NaN on every rank": (
            np.where((np.arange(X.size) == 7).reshape(X.shape), np.nan, X),
            y,
            sw,
        ),
    }
    out = {}
    for face in ("svc", "sgd"):
        for name, (Xc, yc, swc) in cases.items():
            fit = partial(_estimator(face).fit, Xc, yc, sample_weight=swc)
            out[f"{face} {name}"] = _agreed(comm, fit, name)
    # the last rank fits with other parameters: another problem (SVC), another number of
    # model averages (SGD), a value only it refuses; every rank must raise the same error
    cases = {
        "other C": ("svc", "fit", {"C": 2.0}),
        "bad C": ("svc", "fit", {"C": -1.0}),
        "bad n_threads": ("svc", "fit", {"n_threads": -5}),
        "bad distributed": ("svc", "fit", {"distributed": "both"}),
        "bad distributed, sgd": ("sgd", "fit", {"distributed": "both"}),
        "C as an int": ("svc", "fit", {"C": 1}),  # the same C: fits
        "other cache_size": ("svc", "fit", {"cache_size": 50}),  # per rank: fits
        "other period": ("sgd", "fit", {"alpha": 1e-3, "sync_every": 7}),
        "balanced partial_fit": ("sgd", "partial_fit", {"class_weight": "balanced"}),
    }
    for name, (face, call, other) in cases.items():
        est = _estimator(face).set_params(**other) if last else _estimator(face)
        kw = {"classes": [0, 1]} if call == "partial_fit" else {}
        out[name] = _agreed(comm, partial(getattr(est, call), X, y, **kw), name)
    out.update(_feature_names(comm, X, y))
    out.update(_label_types(comm, X, y))
    if comm.rank == 0:
        print(json.dumps(out), flush=True)


def _feature_names(comm, X, y) -> dict:
    """Fits whose X names its columns (a DataFrame: scikit-learn's feature_names_in_), the
    same on every rank, or otherwise on the last rank: the ranks must agree on the names."""
    import pandas as pd

    last = comm.rank == comm.size - 1
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    own = np.array_split(np.arange(y.size), comm.size)[comm.rank]
    part = frame.iloc[own]
    cases = {
        "names, sharded": ("sharded", part, y[own]),
        "names reversed on the last rank, sharded": (
            "sharded", part[["c", "b", "a"]] if last else part, y[own]
        ),
        "names on the first ranks only, replicated": ("replicated", X if last else frame, y),
        "names, no rows as an array on the last rank, sharded": (
            "sharded", np.empty((0, 3)) if last else part, y[:0] if last else y[own]
        ),
    }  # fmt: skip
    out = {}
    for name, (distributed, Xc, yc) in cases.items():
        for face in ("svc", "sgd"):
            fit = partial(_estimator(face).set_params(distributed=distributed).fit, Xc, yc)
            out[f"{face} {name}"] = _agreed(comm, fit, name, lambda e: e.feature_names_in_.tolist())
    return out


def _label_types(comm, X, y) -> dict:
    """Sharded fits whose last rank gives its labels as strings: one error everywhere (their
    union was a class per spelling, '0' beside 0), and as strings on every rank: a model."""
    last = comm.rank == comm.size - 1
    own = np.array_split(np.arange(y.size), comm.size)[comm.rank]
    out = {}
    for name, yc in (("strings on the last rank", y[own].astype(str) if last else y[own]),
                     ("strings on every rank", y[own].astype(str))):  # fmt: skip
        for face in ("svc", "sgd"):
            fit = partial(_estimator(face).set_params(distributed="sharded").fit, X[own], yc)
            out[f"{face} {name}"] = _agreed(comm, fit, name, lambda e: e.classes_)
    return out


def _estimator(face: str):
    return psvm.SVC() if face == "svc" else psvm.SGDSVC(random_state=0, max_iter=5, tol=None)


def _agreed(comm, fit, what: str, read=None) -> str:
    """``fit()``'s outcome, the same on every rank: "ok", "ok VALUE" (``read`` of the fitted
    estimator), or the error it raised."""
    try:
        est = fit()
        result = "ok" if read is None else f"ok {read(est)}"
    except ValueError as e:
        result = f"{type(e).__name__}: {e}"
    every = comm.allgather_obj(result)
    assert all(r == every[0] for r in every), (what, every)
    return result


def _swap(y, last):
    """y with its first two labels of different classes swapped on the last rank."""
    y = y.copy()
    if last:
        i, j = 0, int(np.flatnonzero(y != y[0])[0])
        y[i], y[j] = y[j], y[i]
    return y


if __name__ == "__main__":
    main()

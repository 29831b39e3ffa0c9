"""The svm_types solved once over all rows: one-class and epsilon-SVR (LIBSVM's
``solve_one_class`` and ``solve_epsilon_svr``), on the distributed engine.

Each sets up LIBSVM's general problem (DESIGN.md section 8) over the sharded
rows, solves it, and gathers the support vectors in global row order, so
every rank ends with the same :class:`~psvm.model.SVCModel`:

- one-class: p = 0, y = +1, 0 <= a_t <= 1 (times the row's weight), e'a = nu l,
  starting with the first rows at their bound as LIBSVM does;
- epsilon-SVR: 2l variables (a, a*) over l rows, p = (eps - z, eps + z),
  y = (+1, -1); the model's coefficient is a - a*.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from psvm._params import SVCConfig, make_svc_config
from psvm.kernels import csr_arrays, take_rows
from psvm.model import SVCModel
from psvm.stats import Stats
from psvm.svc.checkpoint import Checkpoint, CheckpointConfig, fingerprint
from psvm.svc.multiclass import (
    TrainingError,
    check_finite,
    check_same_arithmetic,
    global_variance,
    pair_summary,
)
from psvm.svc.solver import BinaryProblem, Solver
from psvm.svc.state import compact_features, gather_csr


def one_class_start(comm, C: np.ndarray, nu: float, weighted: bool) -> np.ndarray:
    """This rank's starting alphas: fill the rows in global order up to nu * sum(C).

    LIBSVM fills floor(nu l) rows with 1 and the next with the rest; with
    weights, scikit-learn's libsvm fills each row up to its C_t in turn. The
    bounds travel whole (8 bytes a row), so every P fills the same way.
    """
    bounds = comm.allgatherv(C)
    offset = comm.exscan_sum(C.size)
    alpha = np.zeros(bounds.size)
    if not weighted:  # LIBSVM: floor(nu l) ones, then the remainder
        n = int(nu * bounds.size)
        alpha[:n] = 1.0
        if n < bounds.size:
            alpha[n] = nu * bounds.size - n
    else:  # scikit-learn's loop, in its order of operations
        left = 0.0
        for c in bounds:
            left += c * nu
        for t, c in enumerate(bounds):
            if left <= 0:
                break
            alpha[t] = min(c, left)
            left -= alpha[t]
    return alpha[offset : offset + C.size]


def _problem(comm, cfg: SVCConfig, Xc, shard, weight: np.ndarray, weighted: bool):
    """The general problem of ``cfg.svm_type`` over this rank's rows."""
    n = shard.y.size
    common = dict(
        X=csr_arrays(Xc),
        n_features=Xc.shape[1],
        offset=shard.offset,
        n_samples=shard.n_samples,
        max_row_nnz=shard.max_row_nnz,
    )
    if cfg.svm_type == "one_class":
        C = weight
        alpha0 = one_class_start(comm, C, cfg.nu, weighted)
        return BinaryProblem(y=np.ones(n), C=C, p=np.zeros(n), alpha0=alpha0, **common)
    if cfg.svm_type == "epsilon_svr":
        z = shard.y.astype(np.float64)
        C = cfg.C * weight
        return BinaryProblem(
            y=np.concatenate((np.ones(n), -np.ones(n))),
            C=np.concatenate((C, C)),
            p=np.concatenate((cfg.epsilon - z, cfg.epsilon + z)),
            per_row=2,
            **common,
        )
    raise TrainingError(f"svm_type {cfg.svm_type!r} is not trained by psvm yet")


def fit_single(
    comm,
    shard,
    params: dict,
    *,
    sample_weight: np.ndarray | None = None,
    stats: Stats | None = None,
    log: Callable[[str], None] | None = None,
    checkpoint: CheckpointConfig | None = None,
) -> tuple[SVCModel, np.ndarray]:
    """Train one-class or epsilon-SVR on a shard; collective, same model on every rank.

    Returns the model and the global row indices of its support vectors.
    ``params`` are validated parameters (:func:`psvm._params.validate_svc_params`).
    """
    stats = Stats() if stats is None else stats
    if shard.n_samples == 0:
        raise TrainingError("training data has no rows")
    if comm.size > 1:
        check_same_arithmetic(comm)
    X = shard.X
    cfg = make_svc_config(
        params, shard.n_features, global_variance(comm, X, shard.n_samples, shard.n_features)
    )
    n = shard.y.size
    weighted = sample_weight is not None
    weight = np.ones(n) if not weighted else np.asarray(sample_weight, dtype=np.float64)
    Xc = compact_features(comm, X)  # the solver's copy; model rows keep their indices
    problem = _problem(comm, cfg, Xc, shard, weight, weighted)
    ck = None
    if checkpoint is not None:
        identity = fingerprint(comm, shard, problem.C, cfg, [], params["gamma"])
        ck = Checkpoint(comm, checkpoint, identity)
    res = Solver(comm, problem, cfg, stats, log, ck).solve()
    check_finite(res, f"in the {cfg.svm_type} problem")
    coef = res.alpha[:n] - res.alpha[n:] if problem.per_row == 2 else res.alpha
    summary = pair_summary(comm, problem, res, coef, with_nu=cfg.svm_type != "one_class")
    if log is not None:
        log(summary)
    local = np.flatnonzero(coef != 0)
    sv_gidx = comm.allgatherv(local.astype(np.int64) + shard.offset)
    sv_rows = gather_csr(comm, *take_rows(*csr_arrays(X), local))
    model = SVCModel(
        svm_type=cfg.svm_type,
        kernel=cfg.kernel,
        gamma=cfg.gamma,
        coef0=cfg.coef0,
        degree=cfg.degree,
        classes=np.zeros(0),
        n_support=np.zeros(0, dtype=np.int64),
        support_vectors=sp.csr_matrix(sv_rows[::-1], shape=(sv_gidx.size, shard.n_features)),
        dual_coef=comm.allgatherv(coef[local])[None, :],
        rho=np.array([res.rho]),
        n_features=shard.n_features,
        meta={
            "n_iter": [res.n_iter],
            "objective": [res.objective],
            "status": res.status,
            "approximate": res.approximate,
            "heuristic": cfg.heuristic,
            "reconstruction": cfg.reconstruction,
        },
    )
    return model, sv_gidx

"""The svm_types solved once over all rows: one-class, epsilon-SVR and nu-SVR (LIBSVM's
``solve_one_class``, ``solve_epsilon_svr`` and ``solve_nu_svr``), on the distributed engine.

Each sets up LIBSVM's general problem (DESIGN.md section 8) over the sharded
rows, solves it, and gathers the support vectors in global row order, so
every rank ends with the same :class:`~psvm.model.SVCModel`:

- one-class: p = 0, y = +1, 0 <= a_t <= 1 (times the row's weight), e'a = nu l,
  starting with the first rows at their bound as LIBSVM does;
- epsilon-SVR: 2l variables (a, a*) over l rows, p = (eps - z, eps + z),
  y = (+1, -1); the model's coefficient is a - a*;
- nu-SVR: the same variables, p = (-z, +z), Solver_NU, a_t = a*_t filled up to
  C nu l / 2 at the start (with sample weights nu sum_t C_t / 2, as scikit-learn).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from psvm._params import CLASSIFIERS, SVCConfig
from psvm.kernels import csr_arrays
from psvm.model import SVCModel
from psvm.stats import Stats
from psvm.svc.checkpoint import CheckpointConfig
from psvm.svc.problem import BinaryProblem
from psvm.svc.solver import Solver
from psvm.svc.state import fill_start, start_total
from psvm.svc.training import (
    NU_ALL_BOUND,
    OVERFLOW,
    TrainingError,
    check_finite,
    gathered_model,
    kernel_facts,
    open_checkpoint,
    pair_summary,
    solver_config,
    solver_rows,
)


def _problem(comm, cfg: SVCConfig, Xc, shard, weight: np.ndarray, weighted: bool):
    """The general problem of ``cfg.svm_type`` over this rank's rows."""
    if cfg.svm_type in CLASSIFIERS:
        raise ValueError(f"fit_single trains one_class, epsilon_svr and nu_svr, not {cfg.svm_type}")
    n, arrays = shard.y.size, csr_arrays(Xc)
    common = dict(
        X=arrays,
        n_features=Xc.shape[1],
        offset=shard.offset,
        n_samples=shard.n_samples,
        max_row_nnz=shard.max_row_nnz,
        **kernel_facts(comm, cfg, arrays),
    )
    if cfg.svm_type == "one_class":
        C = weight
        total = start_total(comm, C, cfg.nu, shard.n_samples, weighted)
        alpha0 = fill_start(comm, C, total)
        return BinaryProblem(y=np.ones(n), C=C, p=np.zeros(n), alpha0=alpha0, **common)
    z, C = shard.y.astype(np.float64), cfg.C * weight
    y2 = np.concatenate((np.ones(n), -np.ones(n)))
    if cfg.svm_type == "epsilon_svr":
        p = np.concatenate((cfg.epsilon - z, cfg.epsilon + z))
        return BinaryProblem(y=y2, C=np.concatenate((C, C)), p=p, per_row=2, **common)
    # nu-SVR: LIBSVM's C nu l / 2, or with weights scikit-learn's nu sum(C_t) / 2
    total = start_total(comm, C, cfg.nu, shard.n_samples, weighted, bound=cfg.C)
    half = fill_start(comm, C, total / 2)
    return BinaryProblem(
        y=y2,
        C=np.concatenate((C, C)),
        p=np.concatenate((-z, z)),
        alpha0=np.concatenate((half, half)),
        per_row=2,
        **common,
    )


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
    """Train one-class, epsilon-SVR or nu-SVR on a shard; collective, same model on every rank.

    Returns the model and the global row indices of its support vectors.
    ``params`` are validated parameters (:func:`psvm._params.validate_svc_params`).
    """
    stats = Stats() if stats is None else stats
    if shard.n_samples == 0:
        raise TrainingError("training data has no rows")
    cfg = solver_config(comm, shard, params)
    X, n = shard.X, shard.y.size
    weighted = sample_weight is not None
    weight = np.ones(n) if not weighted else np.asarray(sample_weight, dtype=np.float64)
    Xc, X = solver_rows(comm, X, cfg.kernel)
    problem = _problem(comm, cfg, Xc, shard, weight, weighted)
    C_row = problem.C[:n]  # an SVR row's two variables share its bound
    ck = open_checkpoint(comm, checkpoint, shard, C_row, cfg, [], params["gamma"])
    res = Solver(comm, problem, cfg, stats, log, ck).solve()
    cause = NU_ALL_BOUND if cfg.svm_type == "one_class" else OVERFLOW
    check_finite(res, f"in the {cfg.svm_type} problem", cause)
    coef = res.alpha[:n] - res.alpha[n:] if problem.per_row == 2 else res.alpha
    note = f"epsilon = {-res.r:f}" if cfg.svm_type == "nu_svr" else None  # as solve_nu_svr
    with_nu = cfg.svm_type == "epsilon_svr"
    summary = pair_summary(comm, problem, res, coef, with_nu=with_nu, note=note)
    if log is not None:
        log(summary)
    meta = {
        "n_iter": [res.n_iter],
        "objective": [res.objective],
        "status": res.status,
        "approximate": res.approximate,
        "heuristic": cfg.heuristic,
        "reconstruction": cfg.reconstruction,
    }
    return gathered_model(comm, shard, cfg, X, coef != 0, coef[None, :], [res.rho], meta)

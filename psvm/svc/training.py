"""What every kernel-SVM type's training shares (one-vs-one in :mod:`psvm.svc.multiclass`,
the one-problem types in :mod:`psvm.svc.single`): the solver's settings and rows, the checks
that refuse a problem or a result, LIBSVM's lines after a solve, and the model gathered
from the ranks' support vectors.
"""

from __future__ import annotations

import hashlib
import math
from functools import cache

import numpy as np
import scipy.sparse as sp

from psvm._params import SVCConfig, make_svc_config
from psvm.gram import serial_rows
from psvm.kernels import (
    arithmetic_probe,
    csr_arrays,
    csr_of,
    is_integral,
    kernel_diag,
    row_sq_norms,
    take_rows,
)
from psvm.model import SVCModel
from psvm.svc.checkpoint import Checkpoint, fingerprint
from psvm.svc.columns import fits_float32
from psvm.svc.problem import BinaryProblem, BinaryResult
from psvm.svc.state import compact_features, gather_csr, row_sums


class TrainingError(ValueError):
    """The training data cannot define a classifier (e.g. a single class)."""

    collective = True  # decided from globally agreed values, so raised on every rank


def pair_summary(
    comm,
    problem: BinaryProblem,
    res: BinaryResult,
    coef=None,
    with_nu: bool = True,
    note: str | None = None,
) -> str:
    """LIBSVM's lines after a solve (its ``nu`` only when every C_t agrees); collective: the
    counts are global. ``coef``: the model's coefficient per row (default: alpha), whose
    magnitude LIBSVM counts against the row's C. ``note``: the nu types' line in its place
    (``C = 1/r``, ``epsilon = -r``)."""
    coef = res.alpha if coef is None else np.abs(coef)
    C = problem.C[: coef.size]
    counts = [np.count_nonzero(coef > 0), np.count_nonzero(coef >= C), coef.sum()]
    n_sv, n_bsv, total = comm.sum_(np.array(counts, dtype=np.float64))
    c_min, c_max = comm.min_(C.min(initial=np.inf)), comm.max_(C.max(initial=-np.inf))
    lines = [f"optimization finished, #iter = {res.n_iter}"]
    if note is not None:
        lines.append(note)
    elif with_nu and c_min == c_max:
        lines.append(f"nu = {total / (c_max * problem.n_samples):f}")
    lines.append(f"obj = {res.objective:f}, rho = {res.rho:f}")
    lines.append(f"nSV = {int(n_sv)}, nBSV = {int(n_bsv)}")
    return "\n".join(lines)


UNSCALED = 100.0  # |feature value| above which an RBF problem gets the scaling hint
# the same for the other kernels, whose values grow as x's products: past about 1e12 (a
# feature of 1e6) the solver's steps lose their digits and may run to max_iter
UNSCALED_PRODUCTS = 1e6


def scale_hint(comm, X: sp.csr_matrix, params: dict) -> str | None:
    """A hint when the features are far from the unit scale, else None (collective).

    Unscaled features make a fixed gamma useless (skin_nonskin, values 0-255, trains in 236 s
    with the default gamma against 2 s at gamma 0.001, and predicts worse). gamma='scale'
    adapts to the data, so it gets no hint. The other kernels get it where their values
    outgrow double precision's use: a linear problem with a feature of 1e14 runs to max_iter.
    """
    kernel = params.get("kernel")
    if kernel == "precomputed" or (kernel != "linear" and params.get("gamma") == "scale"):
        return None
    top = comm.max_(float(np.abs(X.data).max(initial=0.0)))
    if top <= (UNSCALED if kernel == "rbf" else UNSCALED_PRODUCTS):
        return None
    name = "RBF" if kernel == "rbf" else kernel
    return (
        f"feature values reach {top:g}; the {name} kernel works best on features scaled to "
        "[-1, 1] or [0, 1] (LIBSVM's svm-scale, scikit-learn's MinMaxScaler or "
        "StandardScaler): unscaled, training can take far longer and predict worse"
    )


@cache
def _arithmetic_digest() -> str:
    """This process's probe hash: its arithmetic does not change between fits."""
    return hashlib.sha256(arithmetic_probe()).hexdigest()


def check_same_arithmetic(comm) -> None:
    """Refuse to train when the ranks' kernel arithmetic differs (mixed CPUs or builds):
    their steps would part silently (:func:`psvm.kernels.arithmetic_probe`)."""
    if len(set(comm.allgather_obj(_arithmetic_digest()))) > 1:
        raise TrainingError(
            "the ranks compute exp or tanh with different bits (mixed CPUs or "
            "numba/numpy builds); psvm needs the same arithmetic on every rank; "
            "run on one kind of node"
        )


def global_variance(comm, X: sp.csr_matrix, n_samples: int, n_features: int) -> float:
    """Var of all n_samples * n_features entries (zeros included), as X.var() in sklearn.

    Each row's sums are added in the row's own order, then the rows exactly
    (:meth:`psvm.comm.Comm.exact_sum`): gamma='scale' has the same bits for every P.
    """
    total, square = (comm.exact_sum(v) for v in row_sums(*csr_arrays(X)[::2]))
    n = float(n_samples) * n_features
    return float(square / n - (total / n) ** 2) if n else 0.0


OVERFLOW = (
    "the kernel overflows float64 on this data; scale the features (svm-scale, StandardScaler) "
    "or lower gamma, coef0 or degree"
)
# nu-SVC's rho is infinite when every variable of a class sits at a bound (no free one)
NU_BOUND = "nu leaves a class no free variable (lower nu), or " + OVERFLOW
# one-class SVM: nu = 1 puts every alpha at its bound, and rho (LIBSVM's too) is then infinite
NU_ALL_BOUND = "nu leaves no free variable (nu = 1 bounds every alpha: lower nu), or " + OVERFLOW


def check_finite(res: BinaryResult, where: str, cause: str = OVERFLOW) -> None:
    """Refuse a NaN or inf result: a kernel value overflowed, and NaN fails every stop test.

    gap, rho and the objective are agreed values, so every rank raises alike.
    """
    if not all(math.isfinite(v) for v in (res.gap, res.rho, res.objective)):
        raise TrainingError(
            f"the solver's values are not finite {where} "
            f"(gap m - M {res.gap:g}, rho {res.rho:g}, objective {res.objective:g}): {cause}"
        )


def check_nu_margin(res: BinaryResult, where: str) -> None:
    """Refuse nu-SVC's margin r = 0 (or an r whose inverse overflows): the model is the
    solution over r (LIBSVM's solve_nu_svc, whose model then holds NaN). r is agreed."""
    if not math.isfinite(1.0 / res.r if res.r else math.inf):
        raise TrainingError(
            f"nu-SVC's margin r is {res.r:g} {where}, and its model is the solution over r "
            "(LIBSVM's holds NaN then): the kernel leaves these rows no margin (e.g. all-zero "
            "features, gamma=0)"
        )


def solver_config(comm, shard, params: dict) -> SVCConfig:
    """The solver's settings for ``shard`` (gamma resolved over all ranks), after checking
    that the ranks compute kernels with the same bits (collective)."""
    if comm.size > 1:
        check_same_arithmetic(comm)
    x_var = 0.0  # only gamma='scale' reads it (every rank has the same params)
    if params["gamma"] == "scale" and params["kernel"] != "precomputed":
        x_var = global_variance(comm, shard.X, shard.n_samples, shard.n_features)
    return make_svc_config(params, shard.n_features, x_var)


def solver_rows(comm, X: sp.csr_matrix, kernel: str) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """The solver's copy of the rows and the rows a model keeps (collective).

    Feature vectors: the features in use renumbered (:func:`compact_features`), and the
    rows as given. A precomputed kernel reads columns by serial number, so its rows stay
    as they are, and a model keeps their serial numbers only, as LIBSVM's.
    """
    if kernel == "precomputed":
        return X, serial_rows(X)
    return compact_features(comm, X), X


def open_checkpoint(comm, config, shard, C_row, cfg, classes, gamma) -> Checkpoint | None:
    """The run's checkpoint (None without ``config``), identified by its data and settings."""
    if config is None:
        return None
    return Checkpoint(comm, config, fingerprint(comm, shard, C_row, cfg, classes, gamma))


def kernel_facts(comm, cfg: SVCConfig, arrays: tuple) -> dict:
    """This rank's rows' norms and kernel diagonal, whether their values are float32s and
    integers, and, when every rank's are integers (rbf), the largest norm of any rank's rows:
    the rbf table then covers every row, which rows lent across ranks need
    (:mod:`psvm.svc.balance`). None for a precomputed kernel, whose serial numbers and
    diagonal are each problem's. Collective for rbf."""
    if cfg.kernel == "precomputed":
        return dict(sq=None, diag=None, exact32=None, integral=None, sq_max=None)
    indptr, _, data = arrays
    sq = row_sq_norms(indptr, data, np.empty(indptr.size - 1))
    diag = kernel_diag(sq, cfg.kernel_id, cfg.gamma, cfg.coef0, cfg.degree, np.empty(sq.size))
    exact32 = fits_float32(data)
    integral = cfg.kernel == "rbf" and exact32 and is_integral(data)
    sq_max = None
    if cfg.kernel == "rbf" and comm.min_(int(integral)):
        sq_max = comm.max_(float(sq.max(initial=0.0)))
    return dict(sq=sq, diag=diag, exact32=exact32, integral=integral, sq_max=sq_max)


def gathered_model(comm, shard, cfg, X, is_sv, coef, rho, meta, classes=(), cls=None):
    """The model on every rank: the support vectors (``is_sv``, with their rows of ``coef``)
    gathered in global row order, grouped by class (``cls``) for the classifiers, and their
    global row indices (collective)."""
    local = is_sv.nonzero()[0]
    sv_gidx = comm.allgatherv(local.astype(np.int64) + shard.offset)
    m = coef.shape[0]
    sv_coef = comm.allgatherv(coef[:, local].T.ravel()).reshape(-1, m)  # a row per SV
    sv_rows = gather_csr(comm, *take_rows(*csr_arrays(X), local))
    k = len(classes)
    if k:
        sv_cls = comm.allgatherv(cls[local])
        order = np.argsort(sv_cls, kind="stable")
        sv_rows, sv_coef, sv_gidx = take_rows(*sv_rows, order), sv_coef[order], sv_gidx[order]
    model = SVCModel(
        svm_type=cfg.svm_type,
        kernel=cfg.kernel,
        gamma=cfg.gamma,
        coef0=cfg.coef0,
        degree=cfg.degree,
        classes=np.asarray(classes) if k else np.zeros(0),
        n_support=np.bincount(sv_cls, minlength=k).astype(np.int64) if k else np.zeros(0, int),
        support_vectors=csr_of(*sv_rows, (sv_gidx.size, shard.n_features)),
        dual_coef=sv_coef.T,
        rho=np.array(rho),
        n_features=shard.n_features,
        meta=meta,
        trusted=True,
    )
    return model, sv_gidx

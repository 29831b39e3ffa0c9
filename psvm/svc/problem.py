"""LIBSVM's general problem over one rank's rows, and a solve's result (DESIGN.md section 8).

Every svm_type is min 1/2 a'Qa + p'a subject to y'a = const and 0 <= a_t <= C_t,
Q_st = y_s y_t K(x_s, x_t); the types differ only in p, y, the bounds, the
start and whether each row carries one variable or two (SVR).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class BinaryProblem:
    """One rank's share of LIBSVM's general problem (DESIGN.md section 8):
    min 1/2 a'Qa + p'a, y'a = const, 0 <= a_t <= C_t, Q_st = y_s y_t K(x_s, x_t).

    The variables are the local rows in order or, with ``per_row`` = 2 (SVR),
    the local rows twice: variable t and t + n share row t, and the global
    order is LIBSVM's (all first variables, then all second ones).
    """

    X: tuple  # CSR arrays (indptr, indices, data) of the local rows (scipy costs per pair)
    n_features: int
    y: np.ndarray  # +-1 per variable
    C: np.ndarray  # upper bound per variable
    offset: int  # global index of the first local row
    n_samples: int  # global rows
    max_row_nnz: int
    p: np.ndarray | None = None  # linear term per variable; None: -1 (C-SVC)
    alpha0: np.ndarray | None = None  # starting alphas; None: 0
    per_row: int = 1  # variables per row
    sq: np.ndarray | None = None  # |x_r|^2 of the local rows, if known (one-vs-one: per fit)
    diag: np.ndarray | None = None  # K(x_r, x_r) of the local rows, if known
    exact32: bool | None = None  # whether every value is a float32, if known (per fit)
    integral: bool | None = None  # whether every value is an integer, if known (per fit)
    sq_max: float | None = None  # with ``integral``: the largest |x_r|^2 of every rank's rows

    def global_index(self) -> np.ndarray:
        """Each local variable's global index."""
        n = self.X[0].size - 1
        rows = np.arange(self.offset, self.offset + n, dtype=np.int64)
        if self.per_row == 1:
            return rows
        return np.concatenate([rows + k * self.n_samples for k in range(self.per_row)])


@dataclass
class BinaryResult:
    alpha: np.ndarray  # local rows
    rho: float
    objective: float
    gap: float
    n_iter: int
    status: int  # 0 converged, 1 stopped at max_iter
    approximate: bool = False  # eliminated rows were never re-checked
    r: float = 0.0  # Solver_NU's r (the nu types), 0 otherwise

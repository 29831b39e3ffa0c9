"""numba kernels: kernel columns, weighted kernel sums, kernel matrices, diagonals and the CSR
helpers they share.

Contract for every kernel here: CSR arrays ``indptr`` (int64), ``indices``
(int32, 0-based, ascending within a row) and ``data`` (float64); results go
into a preallocated ``out``. One ``kernel_id`` switch selects the kernel, so
each function compiles a single specialization that numba caches on disk.

Every kernel value is computed in two steps: numba writes the argument of
the transcendental part (:func:`~psvm.kernels.values.pre_kernel`: ``-gamma |a - b|^2`` for
rbf, ``gamma a.b + coef0`` for sigmoid, the final value for linear and poly), and
:func:`~psvm.kernels.values.from_pre` applies exp or tanh to the whole contiguous buffer. exp
is :func:`~psvm.kernels.values.exp`, plain arithmetic that numba vectorises (libm's, called
once per value, is 2.5x slower) and that gives each element the same bits wherever it sits in
the buffer. Dot products add their terms in ascending feature order and skip only exact zeros,
so a kernel value does not depend on which rank, path or block computes it.

Modules: :mod:`~psvm.kernels.csr` (arrays), :mod:`~psvm.kernels.values` (kernel values from
dot products), :mod:`~psvm.kernels.columns` (the solver's columns), :mod:`~psvm.kernels.sums`
(decision values, reconstruction), :mod:`~psvm.kernels.matrix` (dense blocks).
"""

from psvm.kernels.columns import (
    DENSE_BLOCK,
    column_csc,
    column_csr,
    column_dense,
    column_table,
    csc_cost,
    dense_column_threads,
    table_column_threads,
)
from psvm.kernels.csr import (
    canonical_csr,
    columns_right,
    csr_arrays,
    csr_of,
    feature_major,
    restrict_columns,
    row_sq_norms,
    sq_norms_of,
    take_rows,
    transpose_csr,
)
from psvm.kernels.matrix import kernel_matrix
from psvm.kernels.sums import LANES, decision_values, epoch_sums, kernel_sums, lane_sums
from psvm.kernels.values import (
    EXP_TABLE_MAX,
    LINEAR,
    POLY,
    RBF,
    SIGMOID,
    all_integers,
    arithmetic_probe,
    exp,
    from_pre,
    from_pre_flat,
    from_table,
    is_integral,
    kernel_diag,
    pre_kernel,
    rbf_table,
)

__all__ = [
    "DENSE_BLOCK",
    "EXP_TABLE_MAX",
    "LANES",
    "LINEAR",
    "POLY",
    "RBF",
    "SIGMOID",
    "all_integers",
    "arithmetic_probe",
    "canonical_csr",
    "column_csc",
    "column_csr",
    "column_dense",
    "column_table",
    "columns_right",
    "csc_cost",
    "csr_arrays",
    "csr_of",
    "decision_values",
    "dense_column_threads",
    "epoch_sums",
    "exp",
    "feature_major",
    "from_pre",
    "from_pre_flat",
    "from_table",
    "is_integral",
    "kernel_diag",
    "kernel_matrix",
    "kernel_sums",
    "lane_sums",
    "pre_kernel",
    "rbf_table",
    "restrict_columns",
    "row_sq_norms",
    "sq_norms_of",
    "table_column_threads",
    "take_rows",
    "transpose_csr",
]

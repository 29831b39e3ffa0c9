"""A rank's contiguous block of rows of a LIBSVM file, loaded in parallel.

Each rank parses only its own byte range (whole lines), then the ranks agree
on errors, line numbers, ``n_features`` and the label set, so that every rank
either holds a consistent shard or raises the same error. Optionally rows are
then moved so that each rank holds a similar number of non-zeros, with the
global row order kept (rank r owns rows ``offsets[r]:offsets[r + 1]``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from psvm.io.gram_rows import (
    SERIAL_FRACTION,
    SERIAL_RANGE,
    bad_row_reason,
    first_bad_row,
    max_serial,
)
from psvm.io.libsvm_format import (
    MAX_INDEX,
    LibsvmFormatError,
    data_line_number,
    parse_block,
    read_byte_range,
    split_byte_ranges,
)
from psvm.io.sources import open_source, stream_block

if TYPE_CHECKING:
    from psvm.comm import Comm

__all__ = [
    "MAX_SQUARED_NORM",
    "Shard",
    "first_overflowing_row",
    "load_shard",
    "labels_in_order",
    "nnz_balanced_offsets",
    "split_byte_ranges",
]


@dataclass
class Shard:
    """The local rows of a globally agreed data set.

    Attributes
    ----------
    X : csr_matrix of shape (n_local, n_features)
        Local rows; float64 data, int32 sorted indices.
    y : ndarray of shape (n_local,), float64
        The local rows' labels as the file gives them (the estimators' shards,
        :meth:`psvm.faces.fit_input.FitInput.shard`, hold class codes or targets).
    offset : int
        Global index of the first local row.
    n_samples : int
        Global number of rows.
    n_features : int
        Global number of columns: the largest index (or the explicit one), one more
        with ``index_base`` 0.
    max_row_nnz : int
        Largest nnz of any row on any rank (sizes row broadcast buffers).
    classes : ndarray of float64 or None
        Distinct labels in order of first appearance in the file.
    index_base : int
        The file's feature index of column 0: 1, or 0 for a file that holds index 0
        (``load_shard(allow_zero=True)``).
    """

    X: sp.csr_matrix
    y: np.ndarray
    offset: int
    n_samples: int
    n_features: int
    max_row_nnz: int
    classes: np.ndarray | None = None
    index_base: int = 1

    @property
    def n_local(self) -> int:
        return self.X.shape[0]

    def zero_based(self) -> Shard:
        """The shard with column j for feature index j (``index_base`` 0), as a model of a
        file that holds index 0 reads it: its columns move one to the right."""
        if self.index_base == 0:
            return self
        from psvm.kernels import columns_right  # (numba's import: only where index 0 is)

        return replace(self, X=columns_right(self.X), n_features=self.n_features + 1, index_base=0)

    def whole(self, comm: Comm) -> Shard:
        """Every rank's rows in global order, on every rank (collective)."""
        if comm.size == 1:
            return self
        from psvm.svc.state import gather_csr

        indptr, indices, data = gather_csr(comm, self.X.indptr, self.X.indices, self.X.data)
        X = sp.csr_matrix((data, indices, indptr), shape=(self.n_samples, self.n_features))
        y = comm.allgatherv(np.asarray(self.y, dtype=np.float64))
        return replace(self, X=X, y=y, offset=0)


# a copy of every rank's rows on each rank (cross-validation folds, class pairs solved whole)
# only while the copies on one node take at most this (CSR bytes)
REPLICATE_MAX_BYTES = 1 << 30


def replicable(comm: Comm, shard: Shard) -> bool:
    """Whether every rank of a node may hold a copy of all rows (collective)."""
    X = shard.X
    nbytes = comm.sum_(int(X.data.nbytes + X.indices.nbytes + 16 * shard.n_local))
    return nbytes * comm.local_size() <= REPLICATE_MAX_BYTES


# -- pure helpers ---------------------------------------------------------------


def nnz_balanced_offsets(
    row_nnz: np.ndarray, size: int, *, weight_before: int = 0, total_weight: int | None = None
) -> np.ndarray:
    """Contiguous row blocks with similar work: offsets of shape (size + 1,).

    Row i weighs ``w_i = nnz_i + 1`` (its non-zeros plus a per-row cost, so
    empty rows still count) and goes to rank ``floor(size * c_i / W)``, where
    ``c_i`` is the weight of all rows before it and ``W`` the total weight.
    Integer arithmetic keeps the rule exact and identical on every rank.

    Called on the whole file (defaults) it returns the global offsets. Called
    on a contiguous piece, with ``weight_before`` (weight of the rows before
    the piece) and ``total_weight``, ``offsets[r]`` counts the piece's rows
    that go to ranks < r: ``np.diff`` gives send counts, and summing the
    results over all pieces gives the global offsets.
    """
    row_nnz = np.asarray(row_nnz, dtype=np.int64)
    w = row_nnz + 1
    c = np.empty(w.size, dtype=np.int64)
    c[:1] = weight_before
    np.cumsum(w[:-1], out=c[1:])
    c[1:] += weight_before
    if total_weight is None:
        total_weight = weight_before + int(w.sum())
    if total_weight <= 0:
        return np.zeros(size + 1, dtype=np.int64)
    dest = (c * size) // total_weight
    offsets = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(np.bincount(dest, minlength=size)[:size], out=offsets[1:])
    return offsets


# The largest squared row norm the kernels take: |x|^2 + |z|^2 - 2 x.z (RBF) then stays finite.
MAX_SQUARED_NORM = np.finfo(np.float64).max / 4


def first_overflowing_row(indptr: np.ndarray, data: np.ndarray) -> int | None:
    """The first CSR row whose squared norm |x|^2 exceeds MAX_SQUARED_NORM, else None.

    Every value is finite, but the kernels add squared norms (RBF: |x|^2 +
    |z|^2 - 2 x.z): an inf there makes the whole solve NaN. Only a pass over
    ``data`` when no row can be that large (the usual case).
    """
    if data.size == 0:
        return None
    widest = max(int(np.diff(indptr).max()), 1)
    if max(data.max(), -data.min()) <= np.sqrt(MAX_SQUARED_NORM / widest):
        return None
    with np.errstate(over="ignore"):
        sq = np.square(data)
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    sq_norms = np.bincount(rows, weights=sq, minlength=indptr.size - 1)
    bad = np.flatnonzero(~(sq_norms <= MAX_SQUARED_NORM))
    return int(bad[0]) if bad.size else None


def _first_appearance(values: np.ndarray) -> np.ndarray:
    """Distinct values in order of first appearance."""
    uniq, first = np.unique(values, return_index=True)
    return uniq[np.argsort(first, kind="stable")]


def _format_label(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


# -- collective entry points ------------------------------------------------------


def labels_in_order(comm: Comm, y_local: np.ndarray) -> np.ndarray:
    """Distinct labels in order of first appearance in the whole file.

    Ranks hold consecutive rows, so rank order is file order; LIBSVM orders
    classes the same way.
    """
    local = _first_appearance(np.asarray(y_local, dtype=np.float64))
    return _first_appearance(comm.allgatherv(local))


def load_shard(
    comm: Comm,
    path,
    *,
    n_features: int | None = None,
    width_name: str | None = None,
    min_classes: int = 2,
    balance: bool = True,
    allow_empty: bool = False,
    gram: str | None = None,
    gram_columns: int = 0,
    allow_zero: bool = False,
    model_labels: bool = False,
) -> Shard:
    """Load this rank's rows of a LIBSVM file; collective over ``comm``.

    Parameters
    ----------
    comm : Comm
    path : str or path-like
        LIBSVM text, or ``.xz``/``.bz2``/``.gz`` (decompressed once per node
        into the cache, see :func:`~psvm.io.libsvm_format.uncompressed_path`).
    n_features : int, default=None
        Expected number of features; an index above it is an error.
        Default: the largest index in the file.
    width_name : str, default=None
        Who set ``n_features`` (``"--n-features"``, ``"the model's"``), said in that error:
        the number alone does not tell the user which width it is.
    min_classes : int, default=2
        Fewer distinct labels is an error (use 0 or 1 for test files).
    balance : bool, default=True
        Move rows so that ranks hold similar nnz (:func:`nnz_balanced_offsets`).
        Otherwise rows stay where their byte range put them.
    allow_empty : bool, default=False
        Accept a file without data lines (a test file: nothing to predict).
    gram : {None, 'train', 'test'}, default=None
        The rows of a precomputed kernel (LIBSVM's ``-t 4``): indices start at 0
        and are kept (column 0 holds the serial number) and the rows are checked
        (:mod:`psvm.io.gram_rows`): 'train' rows name their serial numbers and
        reach the largest one, 'test' rows reach ``gram_columns``.
    gram_columns : int, default=0
        With ``gram='test'``: the last column every row must hold (the model's
        largest serial number).
    allow_zero : bool, default=False
        Accept feature index 0, as svm-train does: if any rank's lines hold one,
        column j is file index j on every rank (``index_base`` 0) and
        ``n_features`` counts column 0 too; else the usual 1-based columns.
    model_labels : bool, default=False
        Every label must be one a model file holds (a classifier's training file): an
        integer within 32 bits (:func:`psvm.io.model_format.file_label`), checked before
        training, so that the run does not fail only when it writes the model.

    Returns
    -------
    Shard

    Raises
    ------
    FileNotFoundError
        If the file does not exist (on every rank).
    LibsvmFormatError
        On every rank, naming the file and the global line: a bad line, a
        row whose squared norm exceeds ``MAX_SQUARED_NORM`` (values too large
        for the kernels), a label no model file holds (``model_labels``), an empty
        file (unless ``allow_empty``), or fewer than ``min_classes`` labels.
    """
    path = os.fspath(path)
    if n_features is not None and (
        int(n_features) != n_features or not 1 <= n_features <= MAX_INDEX
    ):  # (the largest index a file, and a model file, holds)
        comm.agree(
            ValueError(f"n_features must be an integer in [1, {MAX_INDEX}], got {n_features!r}")
        )

    raw, stream = open_source(comm, path)

    parsed, block, lines_before = _parse_own_lines(
        comm, path, raw, n_features, gram, allow_zero, stream, width_name
    )
    if model_labels:
        comm.agree(_label_error(path, parsed, block, lines_before))
    base = 0 if allow_zero and comm.max_(int(parsed.has_zero)) else 1
    if base == 0 and not parsed.has_zero:  # another rank's lines hold index 0
        parsed.indices[:] += 1
    y, indices, data = parsed.y, parsed.indices, parsed.data
    row_nnz = np.diff(parsed.indptr)
    max_index, max_row_nnz, need = _widths(comm, parsed, row_nnz, gram, gram_columns)
    if gram is not None:  # serial numbers first: a bad one would make other rows look short
        train = gram == "train"
        comm.agree(_gram_error(path, parsed, block, lines_before, train, max_index, -1))
        comm.agree(_gram_error(path, parsed, block, lines_before, train, max_index, need, False))
    del block
    counts = comm.allgatherv(np.array([y.size], dtype=np.int64))
    n_samples = int(counts.sum())
    if n_samples == 0 and not allow_empty:  # agree() marks it collective: every rank raises it
        comm.agree(LibsvmFormatError(path, None, "no data lines (empty file)"))
    classes = _classes(comm, path, y, min_classes)

    if balance and comm.size > 1:
        y, row_nnz, indices, data, offsets = _rebalance(comm, y, row_nnz, indices, data)
        indptr = np.zeros(y.size + 1, dtype=np.int64)
        np.cumsum(row_nnz, out=indptr[1:])
    else:
        indptr, offsets = parsed.indptr, np.zeros(comm.size + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
    n_feat = int(n_features) + 1 - base if n_features is not None else max_index
    X = sp.csr_matrix((data, indices, indptr), shape=(y.size, n_feat))
    X.has_sorted_indices = True
    return Shard(
        X=X,
        y=y,
        offset=int(offsets[comm.rank]),
        n_samples=n_samples,
        n_features=n_feat,
        max_row_nnz=max_row_nnz,
        classes=classes,
        index_base=base,
    )


def _widths(comm: Comm, parsed, row_nnz: np.ndarray, gram, gram_columns: int) -> tuple:
    """Over every rank's rows: the columns used, the widest row, and the Gram matrix's
    columns the rows must reach (its rows' largest serial number, or ``gram_columns``)."""
    indices = parsed.indices
    local_max = np.array(
        [
            int(indices.max()) + 1 if indices.size else 0,
            int(row_nnz.max()) if row_nnz.size else 0,
            max_serial(parsed.indptr, indices, parsed.data) if gram == "train" else gram_columns,
        ],
        dtype=np.int64,
    )
    return tuple(int(v) for v in comm.max_(local_max))


def _parse_own_lines(
    comm: Comm, path: str, raw: str, n_features, gram, allow_zero: bool, stream: bool = False,
    width_name: str | None = None,
):  # fmt: skip
    """Parse this rank's byte range of ``raw`` (a ``stream``: the lines rank 0 deals out):
    (parsed, block, lines before it); a bad line on any rank raises on every rank."""
    err, parsed = None, None
    block = stream_block(comm, raw) if stream else b""
    try:
        if not stream:
            start, end = split_byte_ranges(os.path.getsize(raw), comm.size)[comm.rank]
            block = read_byte_range(raw, start, end)
        parsed = parse_block(
            block,
            n_features_limit=n_features,
            limit_name=width_name,
            zero_based=gram is not None,
            allow_zero=allow_zero and gram is None,
        )
    except OSError as e:
        err = e
    lines_before = comm.exscan_sum(0 if parsed is None else parsed.n_lines)
    if err is None:
        err = parsed.error(path, lines_before) or _overflow_error(path, parsed, block, lines_before)
    comm.agree(err)
    return parsed, block, lines_before


def _classes(comm: Comm, path: str, y: np.ndarray, min_classes: int) -> np.ndarray:
    """The labels in file order; fewer than ``min_classes`` raises on every rank."""
    classes = labels_in_order(comm, y)
    if len(classes) < min_classes:
        if len(classes) == 1:
            reason = f"only one class (label {_format_label(classes[0])})"
        else:
            reason = f"only {len(classes)} classes"
        comm.agree(LibsvmFormatError(path, None, f"{reason}; at least {min_classes} are needed"))
    return classes


def _label_error(path: str, parsed, block: bytes, lines_before: int):
    """The error naming the first line whose label no model file holds, else None."""
    from psvm.io.model_format import unwritable_labels

    bad = np.flatnonzero(unwritable_labels(parsed.y))
    if not bad.size:
        return None
    v = float(parsed.y[bad[0]])
    kind = "not an integer" if not v.is_integer() else "not a 32-bit integer"
    line = lines_before + data_line_number(block, int(bad[0]))
    reason = f"label {_format_label(v)} is {kind} (model files hold labels as C ints)"
    return LibsvmFormatError(path, line, reason)


def _overflow_error(path: str, parsed, block: bytes, lines_before: int):
    """The error naming the first line whose row's squared norm overflows, else None."""
    row = first_overflowing_row(parsed.indptr, parsed.data)
    if row is None:
        return None
    values = parsed.data[parsed.indptr[row] : parsed.indptr[row + 1]]
    line = lines_before + data_line_number(block, row)
    return LibsvmFormatError(
        path,
        line,
        f"values too large: the row's squared norm exceeds "
        f"{MAX_SQUARED_NORM:.3g}, so its dot products overflow float64 "
        f"(largest |value| {np.abs(values).max():.3g}); scale the "
        "features, e.g. with svm-scale",
    )


def _gram_error(path, parsed, block, lines_before, train, n_cols, need, serials=True):
    """The error naming the first line that is no precomputed-kernel row, else None.
    ``n_cols``: the file's columns (svm-train's max_index is the last); ``serials``: check
    a training row's serial number (``train``)."""
    indptr, indices, data = parsed.indptr, parsed.indices, parsed.data
    row, code, a, b = first_bad_row(indptr, indices, data, train and serials, n_cols - 1, need)
    if row < 0:
        return None
    value = float(parsed.data[parsed.indptr[row]]) if code in (SERIAL_RANGE, SERIAL_FRACTION) else 0
    line = lines_before + data_line_number(block, row)
    return LibsvmFormatError(path, line, bad_row_reason(code, a, b, value, train))


def _rebalance(comm: Comm, y, row_nnz, indices, data):
    """Move rows to their nnz-balanced owners; rank order stays row order."""
    weight = int(row_nnz.sum()) + y.size
    weight_before = comm.exscan_sum(weight)
    total = int(comm.sum_(weight))
    local = nnz_balanced_offsets(
        row_nnz, comm.size, weight_before=weight_before, total_weight=total
    )
    offsets = comm.sum_(local)
    send_rows = np.diff(local)
    nnz_prefix = np.zeros(y.size + 1, dtype=np.int64)
    np.cumsum(row_nnz, out=nnz_prefix[1:])
    send_nnz = np.diff(nnz_prefix[local])
    y = comm.alltoallv(y, send_rows)
    row_nnz = comm.alltoallv(np.asarray(row_nnz, dtype=np.int64), send_rows)
    indices = comm.alltoallv(indices, send_nnz)
    data = comm.alltoallv(data, send_nnz)
    return y, row_nnz, indices, data, offsets

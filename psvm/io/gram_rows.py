"""The rows of a precomputed-kernel file (LIBSVM's ``-t 4``): svm-train's checks, and psvm's.

A training row is ``label 0:serial 1:K(x,x_1) ... l:K(x,x_l)``, a test row
``label 0:? 1:K(x,x_1) ... l:K(x,x_l)`` (any number for ``?``). LIBSVM reads a
value by its position in the row (``x[serial].value``), so its README asks for
every column, zeros included; psvm reads by column index, which agrees only
then. So beyond svm-train's two checks (column 0 first; a serial number in
[1, largest index]) psvm requires the columns 0, 1, 2, ... in turn, as far as the
largest serial number any row may name, and integer serial numbers (LIBSVM
truncates 2.7 to 2).
"""

from __future__ import annotations

import numpy as np

from psvm.jit import njit

OK, NO_SERIAL, SERIAL_RANGE, SERIAL_FRACTION, GAP, SHORT = range(6)


@njit(cache=True, nogil=True)
def first_bad_row(indptr, indices, data, check_serial, max_index, need):
    """(row, code, a, b) of the first row that breaks the rules above, else (-1, OK, 0, 0).

    ``check_serial``: training rows (column 0 a serial number in [1, max_index]);
    ``need``: the last column every row must reach, -1: columns not checked.
    """
    for r in range(indptr.size - 1):
        s, e = indptr[r], indptr[r + 1]
        if e == s or indices[s] != 0:
            return r, NO_SERIAL, 0, 0
        if check_serial:
            v = data[s]
            if not (1.0 <= v < max_index + 1.0):  # LIBSVM: (int) v in [1, max_index]
                return r, SERIAL_RANGE, 0, max_index
            if v != np.floor(v):
                return r, SERIAL_FRACTION, 0, 0
        if need < 0:
            continue
        for p in range(s + 1, e):
            if indices[p] != p - s:
                return r, GAP, indices[p - 1], indices[p]
        if e - s - 1 < need:
            return r, SHORT, e - s - 1, need
    return -1, OK, 0, 0


def max_serial(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray) -> int:
    """The largest serial number (column 0) of the rows that have one, else 0; at most
    2^31 (larger ones are out of range anyway)."""
    first = indptr[:-1][np.diff(indptr) > 0]
    first = first[indices[first] == 0]
    return int(min(data[first].max(initial=0.0), 2.0**31))


def bad_row_reason(code: int, a: int, b: int, serial_value: float, train: bool) -> str:
    """The message of a :func:`first_bad_row` code (``train``: a training file's row)."""
    if code == NO_SERIAL and not train:
        return "first column must be 0:? (any number: a precomputed kernel's test rows, -t 4)"
    if code == NO_SERIAL:
        return (
            "Wrong input format: first column must be 0:sample_serial_number "
            "(a precomputed kernel's rows, -t 4)"
        )
    if code == SERIAL_RANGE:
        return (
            f"Wrong input format: sample_serial_number out of range ({serial_value:g}; "
            f"the rows' largest index is {b})"
        )
    if code == SERIAL_FRACTION:
        return f"sample_serial_number {serial_value!r} is not an integer"
    if code == GAP:
        return (
            f"column {b} follows {a}: a precomputed kernel's row lists every column 0, 1, "
            "2, ... in turn, zeros included (LIBSVM reads the values by position)"
        )
    return (
        f"the row ends at column {a}, but K(x, x_{b}) is needed (serial number {b}): "
        "a precomputed kernel's row lists K(x, x_j) for every serial number j"
    )

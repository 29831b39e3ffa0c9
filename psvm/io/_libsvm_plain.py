"""Python parser of small LIBSVM blocks of plain numbers (no numba: nothing to compile).

The compiled parser (:mod:`psvm.io._libsvm_kernel`) costs the first run after install about
1.8 s to compile (#14), far more than Python spends on a small block. This parser accepts
only plain, valid input and declines the rest, which the compiled parser then reads (or
rejects with the line-numbered error); tests run every parser test through both.
"""

from __future__ import annotations

import numpy as np

PYTHON_PARSE_BYTES = 1 << 20  # larger blocks go to the compiled parser (2-3x faster)
_PLAIN_BYTES = b"0123456789.+-eE: \t\r\n"


def parse_plain(buf: bytes, cap: int) -> tuple | None:
    """(y, indptr, indices, data) of ``buf`` by Python's ``float``/``int`` if it is plain,
    valid input with 1-based indices up to ``cap``; else None.

    Plain: no comments, no words (nan, inf, qid), no other whitespace. Anything the compiled
    parser might read differently or reject is declined, and that parser then gives the
    same arrays or the line-numbered error (tests compare the two).
    """
    if buf.translate(None, _PLAIN_BYTES):
        return None
    y, indptr, indices, data = [], [0], [], []
    try:
        for line in buf.split(b"\n"):
            tokens = line.split()
            if not tokens:
                continue
            y.append(float(tokens[0]))
            prev = 0
            for token in tokens[1:]:
                index, value = token.split(b":")
                i = int(index)
                if not prev < i <= cap:  # ascending, 1-based, within the limit
                    return None
                prev = i
                indices.append(i - 1)
                data.append(float(value))
            indptr.append(len(indices))
    except ValueError:  # a token float() or int() refuses, or not one colon
        return None
    y, data = np.array(y, dtype=np.float64), np.array(data, dtype=np.float64)
    if not (np.isfinite(y).all() and np.isfinite(data).all()):
        return None
    return y, np.array(indptr, dtype=np.int64), np.array(indices, dtype=np.int32), data

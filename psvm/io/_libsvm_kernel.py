"""numba kernel of the LIBSVM parser: bytes -> CSR arrays plus an error code.

Arrays and scalars only, so it compiles once and caches; it never raises, so
that the caller can turn its block-local line number into a global one.
Messages for the codes live in :mod:`psvm.io.libsvm_format`.
"""

import numpy as np

from psvm._params import INT_MAX
from psvm.jit import inner, njit

# Error codes returned by parse_kernel.
OK = 0
ERR_LABEL = 1
ERR_NO_COLON = 2
ERR_INDEX = 3
ERR_INDEX_LT1 = 4
ERR_ORDER = 5
ERR_VALUE = 6
ERR_NONFINITE = 7
ERR_NONFINITE_LABEL = 8
ERR_QID = 9
ERR_LIMIT = 10
ERR_INDEX_BIG = 11
ERR_INDEX_LT0 = 12
SLOW_FULL = 13  # the table of slow tokens is full (parse_bytes parses again with room for all)
ERR_INDEX_NEG = 14  # negative beyond int: named by its token
# rows of that table at first: most files have no slow token, and room for every token
# would reserve 32 bytes a token (a 10 GB file's table would not fit)
SLOW_ROOM = 1 << 16

# Exact powers of ten: 10**k is representable for k <= 22 (5**22 < 2**53). Globals, which
# numba freezes into the code: passed as arguments, these arrays cost a reference count
# update per token (the parser ran 2.5-3.4x slower).
_POW10 = np.array([float(10**k) for k in range(23)], dtype=np.float64)
_W_NAN = np.frombuffer(b"nan", dtype=np.uint8)
_W_INF = np.frombuffer(b"inf", dtype=np.uint8)
_W_INFINITY = np.frombuffer(b"infinity", dtype=np.uint8)
# the largest feature index a file may hold: svm-train's int, and what a model file holds
# and reads back (stored from 0 or 1, every column fits int32)
MAX_INDEX = INT_MAX
_TWO53 = 2**53


@inner
def _is_ws(c):
    """ASCII whitespace as bytes.split() sees it, except the line end."""
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@inner
def _word_at(buf, i, e, word):
    """True if buf[i:e] equals the lowercase ASCII ``word`` ignoring case."""
    if e - i != word.size:
        return False
    for k in range(word.size):
        if (buf[i + k] | 32) != word[k]:
            return False
    return True


@inner(inline="always")  # (numba's inlining: a call parsed 5-10% slower)
def _exponent(buf, i, e):
    """An exponent's sign and digits from i -> (their end, the digits' count, its value,
    capped past 100000: any such power of ten is 0 or inf)."""
    neg = False
    if i < e and (buf[i] == 43 or buf[i] == 45):
        neg = buf[i] == 45
        i += 1
    ev = 0
    n_exp = 0
    while i < e and 48 <= buf[i] <= 57:
        if ev < 100000:
            ev = ev * 10 + (buf[i] - 48)
        n_exp += 1
        i += 1
    return i, n_exp, -ev if neg else ev


@inner
def _parse_float(buf, s, e):
    """Decimal float in buf[s:e] -> (status, value).

    status 0: exact value; 1: valid syntax outside the exact fast path (convert
    with float()); 2: bad syntax; 3: a NaN/inf word.
    """
    i = s
    neg = False
    if i < e and (buf[i] == 43 or buf[i] == 45):
        neg = buf[i] == 45
        i += 1
    if i < e and ((buf[i] | 32) == 110 or (buf[i] | 32) == 105):
        if _word_at(buf, i, e, _W_NAN) or _word_at(buf, i, e, _W_INF):
            return 3, 0.0
        return (3 if _word_at(buf, i, e, _W_INFINITY) else 2), 0.0
    mant = 0
    slow = False
    n_digits = 0
    exp10 = 0
    while i < e and 48 <= buf[i] <= 57:
        if not slow:
            mant = mant * 10 + (buf[i] - 48)
            slow = mant >= _TWO53
        n_digits += 1
        i += 1
    if i < e and buf[i] == 46:
        i += 1
        while i < e and 48 <= buf[i] <= 57:
            if not slow:
                mant = mant * 10 + (buf[i] - 48)
                slow = mant >= _TWO53
                exp10 -= 1
            n_digits += 1
            i += 1
    if n_digits == 0:
        return 2, 0.0
    if i < e and (buf[i] | 32) == 101:
        i, n_exp, ev = _exponent(buf, i + 1, e)
        if n_exp == 0:
            return 2, 0.0
        exp10 += ev
    if i != e:
        return 2, 0.0
    if slow:
        return 1, 0.0
    if mant == 0:
        value = 0.0
    elif exp10 > 22 or exp10 < -22:
        return 1, 0.0
    elif exp10 >= 0:
        value = float(mant) * _POW10[exp10]
    else:
        value = float(mant) / _POW10[-exp10]
    return 0, -value if neg else value


@inner
def _parse_index(buf, s, e):
    """Base-10 integer in buf[s:e] -> (status, value); 0 ok, 2 bad syntax, 4 too big, 5 a
    negative one beyond int (no value: it would not fit int64)."""
    i = s
    neg = False
    if i < e and (buf[i] == 43 or buf[i] == 45):
        neg = buf[i] == 45
        i += 1
    if i == e:
        return 2, 0
    v = 0
    big = False
    while i < e:
        c = buf[i]
        if c < 48 or c > 57:
            return 2, 0
        d = c - 48
        if v > (MAX_INDEX - d) // 10:  # v * 10 + d > MAX_INDEX, tested before it can overflow
            big = True
        elif not big:
            v = v * 10 + d
        i += 1
    if big:
        return (5 if neg else 4), 0
    return 0, -v if neg else v


@inner
def _push_slow(slow, n_slow, target, s, e, line):
    """Append a token for Python's float(); -1 when the table is full."""
    if n_slow == slow.shape[0]:
        return -1
    slow[n_slow, 0] = target
    slow[n_slow, 1] = s
    slow[n_slow, 2] = e
    slow[n_slow, 3] = line
    return n_slow + 1


@inner
def _next_token(buf, pos, n):
    """Skip blanks from pos: (start of the next token, True), or (past the line end, False).

    The line ends at a newline, a ``#`` comment (skipped to its newline) or the buffer end.
    """
    while pos < n and _is_ws(buf[pos]):
        pos += 1
    if pos >= n:
        return pos, False
    if buf[pos] == 35:
        while pos < n and buf[pos] != 10:
            pos += 1
    elif buf[pos] != 10:
        return pos, True
    return pos + 1, False


@inner(inline="always")  # (as _exponent)
def _feature_index(buf, s, colon, base, prev, limit):
    """The index in buf[s:colon], after ``prev`` -> (OK or an error code, the index, the
    error's two numbers)."""
    if colon - s == 3 and buf[s] == 113 and buf[s + 1] == 105 and buf[s + 2] == 100:
        return ERR_QID, 0, 0, 0
    st, idx = _parse_index(buf, s, colon)
    if st == 2:
        return ERR_INDEX, 0, 0, 0
    if st == 4:  # (_parse_index refuses any index past MAX_INDEX)
        return ERR_INDEX_BIG, 0, 0, 0
    if st == 5:
        return ERR_INDEX_NEG, 0, 0, 0
    if idx < base:
        return (ERR_INDEX_LT1 if base == 1 else ERR_INDEX_LT0), idx, idx, 0
    if idx <= prev:
        return ERR_ORDER, idx, prev, idx
    if limit > 0 and idx - base >= limit:
        return ERR_LIMIT, idx, idx, limit
    return OK, idx, 0, 0


@njit(cache=True, nogil=True)
def parse_kernel(buf, limit, base, y, indptr, indices, data, slow):
    """Parse LIBSVM lines of ``buf`` (uint8) into preallocated CSR arrays.

    File indices start at ``base`` (1; 0 for precomputed kernels, whose column 0
    holds a serial number) and are stored from 0 in int32 ``indices``; ``limit`` > 0
    caps the number of columns. Returns
    (n_rows, nnz, n_slow, err_code, err_line, err_s, err_e, err_a, err_b)
    with err_line local and 1-based. The first ``n_slow`` rows of ``slow`` are (target,
    start, end, line): target >= 0 is a position in ``data``, -(row + 1) a label. When
    ``slow`` is full the code is SLOW_FULL. (A table that grew would be a new array in the
    loop, whose reference counts cost more than the parsing.)
    """
    n = buf.size
    n_slow = 0
    pos = 0
    line = 0
    row = 0
    nnz = 0
    indptr[0] = 0
    while pos < n:
        line += 1
        pos, at_token = _next_token(buf, pos, n)
        if not at_token:  # a blank or comment line
            continue
        s = pos
        while pos < n and not _is_ws(buf[pos]) and buf[pos] != 10 and buf[pos] != 35:
            pos += 1
        st, v = _parse_float(buf, s, pos)
        if st == 2:
            return row, nnz, n_slow, ERR_LABEL, line, s, pos, 0, 0
        if st == 3:
            return row, nnz, n_slow, ERR_NONFINITE_LABEL, line, s, pos, 0, 0
        if st == 1:
            n_slow = _push_slow(slow, n_slow, -(row + 1), s, pos, line)
            if n_slow < 0:
                return row, nnz, 0, SLOW_FULL, line, s, pos, 0, 0
        y[row] = v
        prev = base - 1
        while True:
            pos, at_token = _next_token(buf, pos, n)
            if not at_token:  # the row ends
                break
            s = pos
            colon = -1  # (this scan in a helper, inlined or not, parsed 10-25% slower)
            while pos < n:
                c = buf[pos]
                if _is_ws(c) or c == 10 or c == 35:
                    break
                if c == 58 and colon < 0:
                    colon = pos
                pos += 1
            if colon < 0:
                return row, nnz, n_slow, ERR_NO_COLON, line, s, pos, 0, 0
            code, idx, a, b = _feature_index(buf, s, colon, base, prev, limit)
            if code != OK:
                return row, nnz, n_slow, code, line, s, pos, a, b
            st, v = _parse_float(buf, colon + 1, pos)
            if st == 2:
                return row, nnz, n_slow, ERR_VALUE, line, s, pos, idx, 0
            if st == 3:
                return row, nnz, n_slow, ERR_NONFINITE, line, s, pos, idx, 0
            if st == 1:
                n_slow = _push_slow(slow, n_slow, nnz, colon + 1, pos, line)
                if n_slow < 0:
                    return row, nnz, 0, SLOW_FULL, line, s, pos, 0, 0
            indices[nnz] = idx - base
            data[nnz] = v
            nnz += 1
            prev = idx
        row += 1
        indptr[row] = nnz
    return row, nnz, n_slow, OK, 0, 0, 0, 0, 0


def parse_bytes(arr, limit, y, indptr, indices, data, base=1):
    """parse_kernel with its table of slow tokens, parsing again with room for every token
    if it fills: (n_rows, nnz, slow, n_slow, err_code, err_line, err_s, err_e, err_a, err_b)."""
    every = y.size + indices.size  # room for every label and value
    for room in (min(SLOW_ROOM, every), every):
        slow = np.empty((room, 4), dtype=np.int64)
        row, nnz, n_slow, *err = parse_kernel(arr, limit, base, y, indptr, indices, data, slow)
        if err[0] != SLOW_FULL:
            break
    return (row, nnz, slow, n_slow, *err)

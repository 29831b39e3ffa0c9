"""LIBSVM text format: byte block -> CSR arrays, with line-numbered errors.

The parser is a numba kernel over a ``uint8`` array so that every rank can
parse its own byte range of a file in parallel. It never raises: it reports the
first bad line *local to the block*, because only the caller knows how many
lines precede the block (an exscan of line counts) and so the global line.

Accepted input follows scikit-learn's ``load_svmlight_file(zero_based=False)``:
``label idx:val ...`` per line, ``#`` starts a comment, blank lines are
skipped, a ``\\r`` before ``\\n`` is whitespace. Numbers convert exactly as
Python's ``float()`` does (an exact fast path in numba, ``float()`` otherwise).
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import lzma
import os
import re
import time
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from psvm.io._libsvm_kernel import (
    ERR_INDEX,
    ERR_INDEX_BIG,
    ERR_INDEX_LT0,
    ERR_INDEX_LT1,
    ERR_INDEX_NEG,
    ERR_LABEL,
    ERR_LIMIT,
    ERR_NO_COLON,
    ERR_NONFINITE,
    ERR_NONFINITE_LABEL,
    ERR_ORDER,
    ERR_QID,
    ERR_VALUE,
    MAX_INDEX,
    OK,
    parse_bytes,
)
from psvm.io._libsvm_plain import PYTHON_PARSE_BYTES, parse_plain
from psvm.io.atomic import write_atomic

__all__ = [
    "LibsvmFormatError",
    "ParsedBlock",
    "parse_block",
    "read_libsvm",
    "split_byte_ranges",
    "read_byte_range",
    "to_csr",
    "data_line_number",
    "uncompressed_path",
    "cached_path",
    "cache_dir",
]


class LibsvmFormatError(ValueError):
    """Bad LIBSVM input: names the file, the 1-based line (or None) and why.

    Attributes
    ----------
    path : str
        The file as the user named it.
    line : int or None
        1-based line number in the (uncompressed) file, None for whole-file errors.
    reason : str
        What is wrong.
    """

    def __init__(self, path: str, line: int | None, reason: str):
        self.path = str(path)
        self.line = None if line is None else int(line)
        self.reason = str(reason)
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.line is None:
            return f"{self.path}: {self.reason}"
        return f"{self.path}:{self.line}: {self.reason}"

    def __reduce__(self):
        # Sent between ranks by Comm.agree: the three fields, and what was set on the error
        # (``collective``: a gathered error that loses it makes Comm.guard abort)
        return (type(self), (self.path, self.line, self.reason), self.__dict__)


# The message of each kernel error code; {token} is the offending text, {a} and {b} numbers.
_REASONS = {
    ERR_LABEL: "invalid label {token}: expected a decimal number",
    ERR_NO_COLON: "malformed feature {token}: missing ':' (expected index:value)",
    ERR_INDEX: "invalid feature index in {token}: expected a base-10 integer >= 1",
    ERR_INDEX_BIG: f"feature index in {{token}} is too large (max {MAX_INDEX})",
    ERR_INDEX_LT1: (
        "feature index {a} is not >= 1 (1-based here, as LIBLINEAR reads files; "
        "scikit-learn's dump_svmlight_file writes them so with zero_based=False)"
    ),
    ERR_INDEX_LT0: "index {a} is negative (a precomputed kernel's columns start at 0)",
    ERR_INDEX_NEG: "feature index in {token} is negative",
    ERR_ORDER: "feature index {b} follows {a}: indices must be strictly ascending",
    ERR_LIMIT: "feature index {a} exceeds n_features={b}",
    ERR_VALUE: "invalid feature value in {token}: expected a decimal number",
    ERR_NONFINITE: "non-finite feature value in {token} (NaN and inf are not allowed)",
    ERR_NONFINITE_LABEL: "non-finite label {token} (NaN and inf are not allowed)",
    ERR_QID: "{token}: 'qid:' (query id) is not supported",
}


def _reason(code: int, token: str, a: int, b: int) -> str:
    """The human message for a kernel error code."""
    if code not in _REASONS:
        raise AssertionError(f"unknown error code {code}")
    return _REASONS[code].format(token=token, a=a, b=b)


def _token(buf: bytes, s: int, e: int) -> str:
    text = buf[s:e].decode("utf-8", errors="replace")
    return repr(text if len(text) <= 40 else text[:37] + "...")


class ParsedBlock(NamedTuple):
    """One parsed byte block: CSR arrays of its data lines, or its first error.

    Attributes
    ----------
    y : ndarray of shape (n_rows,), float64
        Labels.
    indptr : ndarray of shape (n_rows + 1,), int64
    indices : ndarray of shape (nnz,), int32
        0-based feature indices (file index - 1; with ``zero_based``, or ``allow_zero``
        and a 0 in the block, the file index), strictly ascending per row.
    data : ndarray of shape (nnz,), float64
    n_lines : int
        Physical lines in the block (blank and comment lines included), so
        that ranks can turn local line numbers into global ones.
    error_line : int or None
        1-based line *within the block* of the first error, or None.
    error_reason : str or None
        Why that line is invalid.
    has_zero : bool
        With ``allow_zero``: the block holds feature index 0 (its indices are the file's).
    """

    y: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    n_lines: int
    error_line: int | None
    error_reason: str | None
    has_zero: bool = False

    def error(self, path: str, lines_before: int = 0) -> LibsvmFormatError | None:
        """The block's error with a global line number, or None."""
        if self.error_reason is None:
            return None
        return LibsvmFormatError(path, lines_before + self.error_line, self.error_reason)


def parse_block(
    buf: bytes,
    *,
    n_features_limit: int | None = None,
    limit_name: str | None = None,
    zero_based: bool = False,
    allow_zero: bool = False,
) -> ParsedBlock:
    """Parse whole LIBSVM lines from ``buf``; never raises on bad input.

    Parameters
    ----------
    buf : bytes
        Complete lines (the last one may lack its ``\\n``).
    n_features_limit : int, default=None
        If given, a 1-based feature index above it is an error.
    limit_name : str, default=None
        Who set the limit, added to that error's reason (``"(--n-features)"``).
    zero_based : bool, default=False
        Indices start at 0 and are kept as they are: the rows of a precomputed
        kernel (LIBSVM's ``-t 4``), whose column 0 holds a serial number.
    allow_zero : bool, default=False
        Feature index 0 is a feature, as svm-train reads it (scikit-learn's
        ``dump_svmlight_file`` writes 0-based files). A block holding one keeps
        the file's indices (``has_zero``); the others are file index - 1, as
        without it, so :func:`psvm.io.shard.load_shard` agrees on one base.

    Returns
    -------
    ParsedBlock
        On error the arrays are empty and ``error_line`` / ``error_reason`` are set.
    """
    if n_features_limit is not None and n_features_limit < 1:
        raise ValueError(f"n_features_limit must be >= 1, got {n_features_limit}")
    buf = bytes(buf)
    n_lines = buf.count(b"\n") + (1 if buf and not buf.endswith(b"\n") else 0)
    if not zero_based and len(buf) <= PYTHON_PARSE_BYTES:
        arrays = parse_plain(buf, n_features_limit or MAX_INDEX)
        if arrays is not None:
            return ParsedBlock(*arrays, n_lines, None, None)
    arr = np.frombuffer(buf, dtype=np.uint8)
    max_rows = n_lines
    max_nnz = buf.count(b":")
    y = np.empty(max_rows, dtype=np.float64)
    indptr = np.empty(max_rows + 1, dtype=np.int64)
    indices = np.empty(max_nnz, dtype=np.int32)
    data = np.empty(max_nnz, dtype=np.float64)
    limit = 0 if n_features_limit is None else int(n_features_limit)
    base = 0 if zero_based or allow_zero else 1
    if allow_zero and limit:  # index N is the last one either way: N + 1 columns from 0
        limit += 1
    n_rows, nnz, slow, n_slow, code, eline, es, ee, ea, eb = parse_bytes(
        arr, limit, y, indptr, indices, data, base
    )
    # Tokens off the exact fast path go through float(); none is bad syntax, but
    # one may overflow (1e999). They precede any syntax error the kernel stopped
    # at, so they are checked first: the error reported is the first bad line's.
    for target, s, e, line in slow[:n_slow].tolist():
        v = float(buf[s:e])
        if not np.isfinite(v):
            if target < 0:
                reason = _reason(ERR_NONFINITE_LABEL, _token(buf, s, e), 0, 0)
            else:
                tok = f"{indices[target] + base}:".encode() + buf[s:e]
                reason = _reason(ERR_NONFINITE, _token(tok, 0, len(tok)), 0, 0)
            return _failed(n_lines, line, reason)
        if code != OK:
            continue
        if target >= 0:
            data[target] = v
        else:
            y[-target - 1] = v
    if code != OK:
        reason = _reason(code, _token(buf, es, ee), ea, eb)
        if allow_zero and code == ERR_LIMIT:  # (n_features counts index 0's column too)
            reason = f"feature index {ea} exceeds the largest index, {eb - 1}"
        if code == ERR_LIMIT and limit_name is not None:
            reason = f"{reason} ({limit_name})"
        if allow_zero and code == ERR_INDEX:
            reason = reason.replace(">= 1", ">= 0")
        elif (allow_zero and code == ERR_INDEX_LT0) or (code == ERR_INDEX_LT1 and ea < 0):
            reason = f"feature index {ea} is negative"  # (not a precomputed kernel's row)
        return _failed(n_lines, int(eline), reason)
    indices = indices[:nnz]
    has_zero = allow_zero and bool((indices == 0).any())
    if allow_zero and not has_zero:
        indices -= 1  # file index - 1, as the other paths give
    return ParsedBlock(
        y[:n_rows], indptr[: n_rows + 1], indices, data[:nnz], n_lines, None, None, has_zero
    )


def data_line_number(buf: bytes, row: int) -> int:
    """The 1-based line of ``buf`` holding its data row ``row`` (0-based), as parse_block counts.

    Blank and comment-only lines hold no row. For error messages only: a
    Python pass over the lines.
    """
    k = -1
    for n, line in enumerate(bytes(buf).split(b"\n"), 1):
        if line.split(b"#", 1)[0].split():  # bytes.split(): the parser's whitespace
            k += 1
            if k == row:
                return n
    raise ValueError(f"buf holds {k + 1} data rows, not row {row}")


def _failed(n_lines: int, line: int, reason: str) -> ParsedBlock:
    """An error result: empty arrays, the local line and the reason."""
    return ParsedBlock(
        np.empty(0),
        np.zeros(1, dtype=np.int64),
        np.empty(0, dtype=np.int32),
        np.empty(0),
        n_lines,
        int(line),
        reason,
    )


def read_libsvm(path, n_features: int | None = None) -> tuple[sp.csr_matrix, np.ndarray]:
    """Read a whole LIBSVM file (serial); ``.xz``/``.bz2``/``.gz`` go through the cache.

    Returns
    -------
    X : csr_matrix of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,), float64

    Raises
    ------
    LibsvmFormatError
        On the first bad line (with its line number) or when there are no data lines.
    """
    path = os.fspath(path)
    with open(uncompressed_path(path), "rb") as f:
        parsed = parse_block(f.read(), n_features_limit=n_features)
    err = parsed.error(path)
    if err is not None:
        raise err
    if parsed.y.size == 0:
        raise LibsvmFormatError(path, None, "no data lines (empty file)")
    if n_features is None:
        n_features = int(parsed.indices.max()) + 1 if parsed.indices.size else 0
    return to_csr(parsed, n_features), parsed.y


def to_csr(parsed: ParsedBlock, n_features: int) -> sp.csr_matrix:
    """CSR matrix of a parsed block (indices already sorted and unique)."""
    X = sp.csr_matrix(
        (parsed.data, parsed.indices, parsed.indptr), shape=(parsed.y.size, n_features)
    )
    X.has_sorted_indices = True
    return X


# -- byte ranges ----------------------------------------------------------------


def split_byte_ranges(file_size: int, n_parts: int) -> list[tuple[int, int]]:
    """Split [0, file_size) into ``n_parts`` contiguous, nearly equal byte ranges."""
    if n_parts < 1:
        raise ValueError(f"n_parts must be >= 1, got {n_parts}")
    bounds = [file_size * k // n_parts for k in range(n_parts + 1)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _line_start_at_or_after(f, pos: int, size: int) -> int:
    """Offset of the first line start >= pos (``size`` if none)."""
    if pos <= 0:
        return 0
    if pos >= size:
        return size
    p = pos - 1
    f.seek(p)
    while True:
        chunk = f.read(1 << 16)
        if not chunk:
            return size
        k = chunk.find(b"\n")
        if k >= 0:
            return p + k + 1
        p += len(chunk)


def read_byte_range(path, start: int, end: int) -> bytes:
    """The lines whose first byte lies in [start, end): blocks of a split tile the file."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        s = _line_start_at_or_after(f, start, size)
        e = _line_start_at_or_after(f, end, size)
        if e <= s:
            return b""
        f.seek(s)
        return f.read(e - s)


# -- compressed input ------------------------------------------------------------

_OPENERS = {".xz": lzma.open, ".bz2": bz2.open, ".gz": gzip.open}
COMPRESSED = tuple(_OPENERS)  # suffixes of compressed input, in any case (``a9a.XZ`` too)


def cache_dir() -> str:
    """Where decompressed copies live: ``$PSVM_CACHE_DIR`` or ``~/.cache/psvm``."""
    return os.environ.get("PSVM_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "psvm"
    )


def cached_path(path) -> str | None:
    """The cache file for a compressed ``path`` (``STEM.PATH.VERSION``: keyed by the path,
    then its size and mtime), else None."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in _OPENERS:
        return None
    return os.path.join(cache_dir(), f"{_path_prefix(path)}.{version_key(path)}")


def _stem(path) -> str:
    """A compressed file's name without its last extension ("a9a" for ".../a9a.xz")."""
    return os.path.basename(os.path.splitext(os.path.abspath(path))[0])


def _path_prefix(path) -> str:
    """What every cached version of ``path`` is named with: its stem and a hash of the path."""
    full = os.path.abspath(path)
    return f"{_stem(path)}.{hashlib.sha256(full.encode()).hexdigest()[:12]}"


def version_key(path) -> str:
    """A name for this version of a file: a hash of its absolute path, size and time."""
    full = os.path.abspath(path)
    st = os.stat(full)
    return hashlib.sha256(f"{full}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:20]


def uncompressed_path(path) -> str:
    """A plain-text path for ``path``: itself, or its decompressed cached copy.

    The copy is written to a temporary file and renamed, so concurrent callers
    never see a partial file.

    Raises
    ------
    LibsvmFormatError
        If the compressed stream is corrupt or truncated.
    """
    path = os.fspath(path)
    target = cached_path(path)
    if target is None:
        return path
    if os.path.exists(target):
        return target
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with (
        write_atomic(target, "wb") as out,
        _OPENERS[os.path.splitext(path)[1].lower()](path) as src,
    ):
        while True:
            try:
                chunk = src.read(1 << 20)
            except (OSError, EOFError, lzma.LZMAError) as e:
                raise LibsvmFormatError(path, None, f"cannot decompress: {e}") from None
            if not chunk:
                break
            out.write(chunk)
    _drop_older_versions(path, target)
    return target


STALE_SECONDS = 3600.0  # a copy of an older version, this old, is no run's any more


def _drop_older_versions(path, target: str) -> None:
    """Remove the cached copies of ``path``'s other versions written an hour ago or more: a
    file rewritten or touched again and again would otherwise fill the cache with copies no
    run reads. (A run that is loading an older version, or a newer one, has just written or
    found its copy; the study's subsets beside a copy have other names.) So do the copies of
    the stem named as before (``STEM.VERSION``, no path hash), which no run reads now."""
    version = r"\.[0-9a-f]{20}"
    names = re.compile(
        f"{re.escape(_path_prefix(path))}{version}|{re.escape(_stem(path))}{version}"
    )
    old = time.time() - STALE_SECONDS
    for entry in os.scandir(os.path.dirname(target)):
        try:
            if names.fullmatch(entry.name) and entry.stat().st_mtime < old:
                os.unlink(entry.path)
        except OSError:  # (another process's prune)
            pass

"""LIBSVM's text model format, read and validated: LIBSVM's own files and psvm's (the
format: :mod:`psvm.io.model_format`). Every error names the file and line.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import scipy.sparse as sp

from psvm._params import CLASSIFIERS, INT_MAX, SVM_TYPES
from psvm.io.model_format import (
    FILE_KERNELS,
    HEADER_KEYS,
    KEPT_KEYS,
    KERNEL_FIELDS,
    LABEL_RANGE,
    TRAILER,
    ModelFormatError,
    unescape_trailer,
)
from psvm.kernels import columns_right
from psvm.model import SVCModel
from psvm.probability import N_MARKS  # svm_load_model reads that many prob_density_marks


class _Reader:
    """Line-numbered parsing helpers bound to one file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def error(self, line: int, reason: str) -> ModelFormatError:
        return ModelFormatError(self.path, line, reason)

    def number(self, tok: str, line: int, what: str) -> float:
        try:
            if "_" in tok:  # float() accepts '1_0'; LIBSVM's strtod does not
                raise ValueError
            x = float(tok)
        except ValueError:
            raise self.error(line, f"bad number {tok!r} for {what}") from None
        if not np.isfinite(x):
            raise self.error(line, f"non-finite value {tok!r} for {what}")
        return x

    def integer(self, tok: str, line: int, what: str) -> int:
        try:
            if "_" in tok:
                raise ValueError
            return int(tok)
        except ValueError:
            raise self.error(line, f"bad integer {tok!r} for {what}") from None


def read_model(path: str | os.PathLike) -> SVCModel:
    """Read a LIBSVM text model (LIBSVM's own or psvm's) and validate it.

    Parameters
    ----------
    path : str or path-like
        Model file written by ``svm_save_model`` or ``write_model``.

    Returns
    -------
    model : SVCModel
        ``probA``/``probB`` (-b 1) and ``prob_density_marks`` lines are kept in ``meta``.

    Raises
    ------
    ModelFormatError
        On any malformed or inconsistent content, naming the file and line.
    """
    rd = _Reader(os.fspath(path))
    with open(rd.path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")  # not splitlines(): keep LIBSVM's line numbers
    if lines[-1] == "":
        lines.pop()
    if not any(text.strip() for text in lines):  # (neither LIBSVM's format nor LIBLINEAR's)
        raise rd.error(1, "empty model file")
    header, sv_line = _read_header(rd, lines)
    fields = _header_fields(rd, header, sv_line)
    total_sv = fields.pop("total_sv")
    n_coef = len(fields["classes"]) - 1 if fields["svm_type"] in CLASSIFIERS else 1
    gram = fields["kernel"] == "precomputed"  # LIBSVM's 0:serial
    coef, sv, base = _read_svs(rd, lines, sv_line, total_sv, n_coef, gram)
    n_features, n_features_line, zero = _read_trailer(rd, lines, sv_line, total_sv, fields["meta"])
    if zero and base == 1 and not gram:  # 0-based data, no support vector on feature 0
        sv, base = columns_right(sv), 0
    if n_features is not None and n_features < sv.shape[1]:
        raise rd.error(
            n_features_line,
            f"n_features {n_features} is less than the largest SV feature index {sv.shape[1]}",
        )
    try:
        return SVCModel(
            support_vectors=sv,
            dual_coef=coef.T.copy(),
            n_features=n_features,
            index_base=1 if gram else base,
            **fields,
        )
    except ValueError as e:  # the reader's own checks should leave nothing to catch here
        raise rd.error(sv_line, str(e)) from None


def _read_header(rd: _Reader, lines: list[str]) -> tuple[dict, int]:
    """``{key: (line, values)}`` up to the ``SV`` line, and that line's number."""
    header: dict[str, tuple[int, list[str]]] = {}
    for lno, text in enumerate(lines, 1):
        toks = text.split()
        if not toks:
            raise rd.error(lno, "blank line in the header")
        key = toks[0]
        if key == "SV" and len(toks) == 1:
            return header, lno
        if key not in HEADER_KEYS:
            raise rd.error(lno, f"unknown header field {key!r}")
        if key in header:
            raise rd.error(lno, f"duplicate header field {key!r} (first on line {header[key][0]})")
        header[key] = (lno, toks[1:])
    raise rd.error(max(len(lines), 1), "end of file before the 'SV' line")


def _header_fields(rd: _Reader, header: dict, sv_line: int) -> dict[str, Any]:
    """Parse and cross-check the header; every error names the line of its field."""
    h = _Header(rd, header, sv_line)
    out = _type_fields(h)
    svm_type = out["svm_type"]
    classify = svm_type in CLASSIFIERS
    k, line = h.one("nr_class", rd.integer)
    if k < 1 or (not classify and k != 2):
        expected = ">= 1" if classify else f"2 for {svm_type}"
        raise rd.error(line, f"nr_class must be {expected}, got {k}")
    h.k = k
    total_sv, line = h.one("total_sv", rd.integer)
    if total_sv < 0:
        raise rd.error(line, f"total_sv must be >= 0, got {total_sv}")
    line, vals = h.values("rho", k * (k - 1) // 2)
    out["rho"] = np.array([rd.number(v, line, "rho") for v in vals])
    if classify:
        out["classes"], out["n_support"] = _class_fields(h, total_sv)
    else:
        for key in ("label", "nr_sv"):
            if key in header:
                raise rd.error(header[key][0], f"{key} is for c_svc and nu_svc only")
        out["classes"], out["n_support"] = np.zeros(0), np.zeros(0, dtype=np.int64)
    out["total_sv"] = total_sv
    _kept(h, out)
    return out


PER_CLASS = ("rho", "label", "nr_sv", "probA", "probB")  # counts that follow nr_class


class _Header:
    """The header's ``{key: (line, values)}``, read field by field; errors name the line."""

    def __init__(self, rd: _Reader, header: dict, sv_line: int):
        self.rd, self.header, self.sv_line = rd, header, sv_line
        self.k = 0  # nr_class, once read

    def values(self, key: str, n: int | None = None) -> tuple[int, list[str]]:
        """The field's line and values (``n`` of them, if given)."""
        if key not in self.header:
            raise self.rd.error(self.sv_line, f"missing header field {key!r} before 'SV'")
        line, vals = self.header[key]
        if n is not None and len(vals) != n:
            per_class = f" for nr_class {self.k}" if key in PER_CLASS else ""
            raise self.rd.error(line, f"{key} has {len(vals)} values, expected {n}{per_class}")
        return line, vals

    def one(self, key: str, parse) -> tuple[Any, int]:
        """The field's one value, parsed, and its line."""
        line, vals = self.values(key, 1)
        return parse(vals[0], line, key), line


def _type_fields(h: _Header) -> dict[str, Any]:
    """svm_type and the kernel's fields, with LIBSVM's defaults for those it omits."""
    rd = h.rd
    line, (svm_type,) = h.values("svm_type", 1)
    if svm_type not in SVM_TYPES:
        raise rd.error(line, f"unknown svm_type {svm_type!r}; expected one of {list(SVM_TYPES)}")
    line, (kernel_type,) = h.values("kernel_type", 1)
    if kernel_type not in FILE_KERNELS:
        raise rd.error(
            line,
            f"unknown or unsupported kernel_type {kernel_type!r}; expected one "
            f"of {sorted(FILE_KERNELS)}",
        )
    # Defaults for fields LIBSVM omits for kernels that ignore them; those a kernel reads,
    # svm_save_model always writes (LIBSVM would read an unset value, e.g. rbf's gamma).
    for key in KERNEL_FIELDS[kernel_type]:
        h.values(key, 1)
    out: dict[str, Any] = {
        "kernel": FILE_KERNELS[kernel_type],
        "gamma": 0.0,
        "coef0": 0.0,
        "degree": 3,
        "meta": {},
        "svm_type": svm_type,
    }
    for key, parse in (("degree", rd.integer), ("gamma", rd.number), ("coef0", rd.number)):
        if key in h.header:
            out[key] = h.one(key, parse)[0]
    return out


def _class_fields(h: _Header, total_sv: int) -> tuple[np.ndarray, np.ndarray]:
    """A classifier's labels and support vectors per class (nr_sv, summing to total_sv)."""
    rd, k = h.rd, h.k
    line, vals = h.values("label", k)
    labels = [rd.integer(v, line, "label") for v in vals]
    wide = [c for c in labels if not LABEL_RANGE[0] <= c <= LABEL_RANGE[1]]
    if wide:  # svm_load_model reads an int
        raise rd.error(line, f"label {wide[0]} is outside LIBSVM's 32-bit integers")
    if len(set(labels)) != k:
        raise rd.error(line, f"labels are not distinct: {labels}")
    line, vals = h.values("nr_sv", k)
    n_support = [rd.integer(v, line, "nr_sv") for v in vals]
    if any(n < 0 for n in n_support):
        raise rd.error(line, f"nr_sv must be non-negative, got {n_support}")
    if sum(n_support) != total_sv:
        raise rd.error(line, f"nr_sv sums to {sum(n_support)} but total_sv is {total_sv}")
    return np.array(labels, dtype=np.int64), np.array(n_support, dtype=np.int64)


def _kept(h: _Header, out: dict) -> None:
    """The probability lines, kept in ``meta`` (probA/probB: :mod:`psvm.probability`): a
    sigmoid per class pair, as many as rho's values, and one-class's density marks, as many
    as svm_load_model reads."""
    rd, header = h.rd, h.header
    if "prob_density_marks" in header and out["svm_type"] != "one_class":
        raise rd.error(header["prob_density_marks"][0], "prob_density_marks is for one_class only")
    for key in KEPT_KEYS:
        if key in header:
            n = N_MARKS if key == "prob_density_marks" else h.k * (h.k - 1) // 2
            line, vals = h.values(key, n)
            out["meta"][key] = [rd.number(v, line, key) for v in vals]


def _read_svs(
    rd: _Reader, lines: list[str], sv_line: int, total_sv: int, m: int, gram: bool = False
) -> tuple[np.ndarray, sp.csr_matrix, int]:
    """The ``total_sv`` lines after ``SV``: m coefficients, then ``idx:val`` pairs, and the
    base of the indices: 0 if one is 0 (as svm-train writes a model of such data; column
    j is index j), else 1 (column j is index j + 1). ``gram``: a precomputed kernel's
    ``0:serial`` lines, each with its serial number (base 0)."""
    coef = np.empty((total_sv, m))
    indptr = np.zeros(total_sv + 1, dtype=np.int64)
    indices: list[int] = []
    data: list[float] = []
    for r in range(total_sv):
        lno = sv_line + r + 1
        if lno > len(lines):
            raise rd.error(lno, f"file ends after {r} SV lines, but total_sv is {total_sv}")
        toks = lines[lno - 1].split()
        if not toks or toks[0].startswith("#"):
            raise rd.error(
                lno,
                f"expected SV line {r + 1} of {total_sv}, got "
                f"{'a blank line' if not toks else 'a comment'}",
            )
        if len(toks) < m or any(":" in t for t in toks[:m]):
            raise rd.error(lno, f"SV line has fewer than {m} coefficients")
        coef[r] = [rd.number(t, lno, "an SV coefficient") for t in toks[:m]]
        prev = -1
        if gram and not (toks[m:] and toks[m].startswith("0:")):
            raise rd.error(lno, "a precomputed kernel's SV line must give 0:serial_number")
        for t in toks[m:]:
            i_tok, sep, v_tok = t.partition(":")
            if not sep:
                raise rd.error(lno, f"expected index:value, got {t!r}")
            idx = rd.integer(i_tok, lno, "a feature index")
            if idx <= prev or idx > INT_MAX:
                raise rd.error(
                    lno,
                    f"feature index {idx} is not in ({prev}, {INT_MAX}]: "
                    "indices must be non-negative and strictly ascending",
                )
            prev = idx
            indices.append(idx)
            data.append(rd.number(v_tok, lno, f"feature {idx}"))
            if gram and idx == 0 and (data[-1] < 1 or data[-1] % 1):
                raise rd.error(lno, f"serial number {v_tok!r} is not an integer >= 1")
        indptr[r + 1] = len(indices)
    cols = np.asarray(indices, dtype=np.int32)
    base = 0 if gram or (cols == 0).any() else 1
    cols -= base
    sv = sp.csr_matrix(
        (np.asarray(data, dtype=np.float64), cols, indptr),
        shape=(total_sv, int(cols.max(initial=-1)) + 1),
    )
    return coef, sv, base


def _read_trailer(
    rd: _Reader, lines: list[str], sv_line: int, total_sv: int, meta: dict
) -> tuple[int | None, int | None, bool]:
    """psvm's ``#psvm`` lines after the SVs (n_features, its line, whether the data was
    0-based); other comments and blank lines are skipped."""
    n_features = n_features_line = None
    zero = False
    for lno in range(sv_line + total_sv + 1, len(lines) + 1):
        text = lines[lno - 1]
        toks = text.split()
        if not toks:
            continue
        if not toks[0].startswith("#"):
            raise rd.error(lno, f"more SV lines than total_sv {total_sv}")
        if toks[0] != TRAILER or len(toks) < 2:
            continue  # a plain comment
        if toks[1] == "n_features" and len(toks) == 3:
            n_features, n_features_line = rd.integer(toks[2], lno, "n_features"), lno
        elif toks[1] == "index_base" and toks[2:] == ["0"]:
            zero = True
        elif toks[1] == "meta":
            try:
                extra = json.loads(unescape_trailer(text.split("meta", 1)[1]))
            except ValueError as e:
                raise rd.error(lno, f"bad psvm meta JSON: {e}") from None
            if not isinstance(extra, dict):
                raise rd.error(lno, "psvm meta must be a JSON object")
            meta.update(extra)
        else:
            raise rd.error(lno, f"unknown psvm trailer line {' '.join(toks[:2])!r}")
    return n_features, n_features_line, zero

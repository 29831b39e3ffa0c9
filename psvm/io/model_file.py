"""LIBSVM's text model format: written atomically, validated on load.

The layout is LIBSVM's ``svm_save_model`` so that ``svm_load_model`` reads what
psvm writes. Numbers are written with Python's ``repr``, the shortest text that
``strtod`` reads back as the same float64 (as exact as LIBSVM's ``%.17g``, and
used for support-vector values too, where LIBSVM writes ``%.8g``), so a psvm
round trip is exact. psvm's extras go in trailing ``#psvm`` lines after the SV
lines: LIBSVM reads exactly ``total_sv`` lines after ``SV`` and never parses
the rest, but its element-counting pass counts every ':' in the remaining
lines, so the trailer holds none (':' and '%' are percent-escaped in the JSON).
"""

from __future__ import annotations

import itertools
import json
import numbers
import os
import re
from typing import Any

import numpy as np
import scipy.sparse as sp

from psvm._params import CLASSIFIERS, INT_MAX, SVM_TYPES
from psvm.io.atomic import write_atomic
from psvm.kernels import columns_right
from psvm.model import COUPLING_ORDER, SVCModel
from psvm.probability import N_MARKS  # svm_load_model reads that many prob_density_marks

# LIBSVM's kernel_type_table names; psvm's names are sklearn's.
_FILE_KERNELS = {
    "linear": "linear",
    "polynomial": "poly",
    "rbf": "rbf",
    "sigmoid": "sigmoid",
    "precomputed": "precomputed",
}
_KERNEL_TO_FILE = {v: k for k, v in _FILE_KERNELS.items()}
_KERNEL_FIELDS = {  # the header fields each kernel reads (svm_save_model writes them)
    "linear": (),
    "polynomial": ("degree", "gamma", "coef0"),
    "rbf": ("gamma",),
    "sigmoid": ("gamma", "coef0"),
    "precomputed": (),
}
_HEADER_KEYS = (
    "svm_type", "kernel_type", "degree", "gamma", "coef0", "nr_class",
    "total_sv", "rho", "label", "probA", "probB", "prob_density_marks", "nr_sv",
)  # fmt: skip
# Probability header fields, kept in ``meta`` (and written back in their place).
_KEPT_KEYS = ("probA", "probB", "prob_density_marks")
_TRAILER = "#psvm"


class ModelFormatError(ValueError):
    """A model file that cannot be read, with the file and 1-based line to blame."""

    def __init__(self, path: str | os.PathLike, line: int, reason: str) -> None:
        self.path = os.fspath(path)
        self.line = line
        self.reason = reason
        super().__init__(f"{self.path}:{line}: {reason}")

    def __reduce__(self):
        return (type(self), (self.path, self.line, self.reason))


def _g(x: float) -> str:
    """Shortest text that reads back as the same float64 (as exact as %.17g, shorter)."""
    return repr(float(x))


def _escape(text: str) -> str:
    """Keep ':' out of the trailer (LIBSVM counts them) in a reversible way."""
    return text.replace("%", "%25").replace(":", "%3A")


def _unescape(text: str) -> str:
    return re.sub("%(25|3A)", lambda m: "%" if m.group(1) == "25" else ":", text)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"meta value of type {type(obj).__name__} is not JSON serializable")


# the labels a model file holds: LIBSVM's svm_load_model and LIBLINEAR's load_model read them
# into C ints (%d), so a label past 32 bits would load as another one
LABEL_RANGE = (-INT_MAX - 1, INT_MAX)


def unwritable_labels(y: np.ndarray) -> np.ndarray:
    """Where ``y`` (float labels) holds a label no model file holds: not an integer, or
    outside :data:`LABEL_RANGE` (the rule of :func:`file_label`, over an array)."""
    return (y != np.floor(y)) | (y < LABEL_RANGE[0]) | (y > LABEL_RANGE[1])


def file_label(c, kind: str = "LIBSVM") -> str:
    """Label ``c`` as a model file writes it; a ValueError when LIBSVM (``kind``: or LIBLINEAR)
    would not read it back as ``c``: not an integer, or outside :data:`LABEL_RANGE`."""
    if isinstance(c, bool) or not isinstance(c, numbers.Real) or not float(c).is_integer():
        raise ValueError(f"{kind} model files hold integer labels only, got label {c!r}")
    if unwritable_labels(np.array([float(c)]))[0]:
        raise ValueError(
            f"{kind} model files hold 32-bit integer labels only (read with %d), got label {int(c)}"
        )
    return str(int(c))


def _header_lines(model: SVCModel) -> list[str]:
    """The header exactly as LIBSVM's svm_save_model orders and formats it (no ``label``
    and ``nr_sv`` lines for the types without classes)."""
    labels = [file_label(c) for c in model.classes.tolist()]
    kernel = _KERNEL_TO_FILE[model.kernel]
    lines = [f"svm_type {model.svm_type}", f"kernel_type {kernel}"]
    for key in _KERNEL_FIELDS[kernel]:
        v = getattr(model, key)
        lines.append(f"{key} {v}" if key == "degree" else f"{key} {_g(v)}")
    lines += [
        f"nr_class {model.n_classes}",
        f"total_sv {model.support_vectors.shape[0]}",
        " ".join(["rho", *map(_g, model.rho.tolist())]),
    ]
    if model.is_classifier:
        lines.append(" ".join(["label", *labels]))
    for key in _KEPT_KEYS:
        if key in model.meta:
            lines.append(" ".join([key, *map(_g, np.atleast_1d(model.meta[key]).tolist())]))
    if model.is_classifier:
        lines.append(" ".join(["nr_sv", *map(str, model.n_support.tolist())]))
    lines.append("SV")
    return lines


def sv_lines(model: SVCModel, lo: int = 0, hi: int | None = None) -> str:
    """The SV lines of support vectors ``lo`` to ``hi`` (default: to the last), each ending
    in a newline: the k-1 coefficients, then ``idx:val`` pairs from ``index_base`` (a precomputed
    kernel's: ``0:serial``, as svm_save_model's). ``repr`` of every number is most of a
    model's writing (33 ms of ijcnn1's 78,000), so the ranks can share it."""
    sv = model.support_vectors
    hi = sv.shape[0] if hi is None else hi
    coef = model.dual_coef[:, lo:hi].T.tolist()
    if model.kernel == "precomputed":
        tails = [[f"0:{n}"] for n in model.serials()[lo:hi].tolist()]
    else:
        ptr = sv.indptr[lo : hi + 1].tolist()
        a, b = ptr[0], ptr[-1]
        index = (sv.indices[a:b].astype(np.int64) + model.index_base).tolist()
        pairs = [f"{i}:{v!r}" for i, v in zip(index, sv.data[a:b].tolist(), strict=True)]
        tails = [pairs[p - a : q - a] for p, q in itertools.pairwise(ptr)]
    return "".join(" ".join([*map(repr, c), *t]) + "\n" for c, t in zip(coef, tails, strict=True))


def _trailer_lines(model: SVCModel) -> list[str]:
    lines = []
    if model.n_features is not None:
        lines.append(f"{_TRAILER} n_features {model.n_features}")
    if model.index_base == 0:  # (also where no support vector shows index 0)
        lines.append(f"{_TRAILER} index_base 0")
    # (a written model is coupled in its own class order, the file's: not the one it came from)
    extra = {k: v for k, v in model.meta.items() if k not in (*_KEPT_KEYS, COUPLING_ORDER)}
    if extra:
        text = json.dumps(extra, default=_json_default, sort_keys=True)
        lines.append(f"{_TRAILER} meta {_escape(text)}")
    return lines


def write_model(path: str | os.PathLike, model: SVCModel, body: str | None = None) -> None:
    """Write ``model`` in LIBSVM's text format, atomically.

    The text goes to a temporary file in the same directory, is flushed and
    fsynced, then moved over ``path`` with ``os.replace``: readers see the old
    file or the whole new one, never a partial model.

    Parameters
    ----------
    path : str or path-like
        Destination file.
    model : SVCModel
        The model; its labels must be 32-bit integers (LIBSVM reads them with ``%d``).
    body : str, default=None
        The model's :func:`sv_lines`, if formatted already.

    Raises
    ------
    ValueError
        If the model is inconsistent or has a label that is no 32-bit integer
        (:func:`file_label`). The destination is then left untouched.
    """
    model.validate()
    # Everything that can fail on bad input happens before a file exists.
    header, trailer = _header_lines(model), _trailer_lines(model)
    body = sv_lines(model) if body is None else body
    with write_atomic(path, encoding="ascii", newline="\n") as f:
        f.write("\n".join(header) + "\n")
        f.write(body)
        for line in trailer:
            f.write(line + "\n")


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
        if key not in _HEADER_KEYS:
            raise rd.error(lno, f"unknown header field {key!r}")
        if key in header:
            raise rd.error(lno, f"duplicate header field {key!r} (first on line {header[key][0]})")
        header[key] = (lno, toks[1:])
    raise rd.error(max(len(lines), 1), "end of file before the 'SV' line")


def _header_fields(rd: _Reader, header: dict, sv_line: int) -> dict[str, Any]:
    """Parse and cross-check the header; every error names the line of its field."""

    k = 0  # nr_class, once read

    def values(key: str, n: int | None = None) -> tuple[int, list[str]]:
        if key not in header:
            raise rd.error(sv_line, f"missing header field {key!r} before 'SV'")
        line, vals = header[key]
        if n is not None and len(vals) != n:
            per_class = f" for nr_class {k}" if key in ("rho", "label", "nr_sv") else ""
            raise rd.error(line, f"{key} has {len(vals)} values, expected {n}{per_class}")
        return line, vals

    def one(key: str, parse):
        line, vals = values(key, 1)
        return parse(vals[0], line, key), line

    line, (svm_type,) = values("svm_type", 1)
    if svm_type not in SVM_TYPES:
        raise rd.error(line, f"unknown svm_type {svm_type!r}; expected one of {list(SVM_TYPES)}")
    classify = svm_type in CLASSIFIERS
    line, (kernel_type,) = values("kernel_type", 1)
    if kernel_type not in _FILE_KERNELS:
        raise rd.error(
            line,
            f"unknown or unsupported kernel_type {kernel_type!r}; expected one "
            f"of {sorted(_FILE_KERNELS)}",
        )
    # Defaults for fields LIBSVM omits for kernels that ignore them; those a kernel reads,
    # svm_save_model always writes (LIBSVM would read an unset value, e.g. rbf's gamma).
    for key in _KERNEL_FIELDS[kernel_type]:
        values(key, 1)
    out: dict[str, Any] = {
        "kernel": _FILE_KERNELS[kernel_type],
        "gamma": 0.0,
        "coef0": 0.0,
        "degree": 3,
        "meta": {},
        "svm_type": svm_type,
    }
    for key, parse in (("degree", rd.integer), ("gamma", rd.number), ("coef0", rd.number)):
        if key in header:
            out[key] = one(key, parse)[0]
    k, line = one("nr_class", rd.integer)
    if k < 1 or (not classify and k != 2):
        expected = ">= 1" if classify else f"2 for {svm_type}"
        raise rd.error(line, f"nr_class must be {expected}, got {k}")
    total_sv, line = one("total_sv", rd.integer)
    if total_sv < 0:
        raise rd.error(line, f"total_sv must be >= 0, got {total_sv}")
    line, vals = values("rho", k * (k - 1) // 2)
    out["rho"] = np.array([rd.number(v, line, "rho") for v in vals])
    if not classify:
        for key in ("label", "nr_sv"):
            if key in header:
                raise rd.error(header[key][0], f"{key} is for c_svc and nu_svc only")
        out["classes"], out["n_support"] = np.zeros(0), np.zeros(0, dtype=np.int64)
        out["total_sv"] = total_sv
        _kept(rd, header, out)
        return out
    line, vals = values("label", k)
    labels = [rd.integer(v, line, "label") for v in vals]
    if len(set(labels)) != k:
        raise rd.error(line, f"labels are not distinct: {labels}")
    out["classes"] = np.array(labels, dtype=np.int64)
    line, vals = values("nr_sv", k)
    n_support = [rd.integer(v, line, "nr_sv") for v in vals]
    if any(n < 0 for n in n_support):
        raise rd.error(line, f"nr_sv must be non-negative, got {n_support}")
    if sum(n_support) != total_sv:
        raise rd.error(line, f"nr_sv sums to {sum(n_support)} but total_sv is {total_sv}")
    out["n_support"], out["total_sv"] = np.array(n_support, dtype=np.int64), total_sv
    _kept(rd, header, out)
    return out


def _kept(rd: _Reader, header: dict, out: dict) -> None:
    """The probability lines, kept in ``meta`` (probA/probB: :mod:`psvm.probability`)."""
    for key in _KEPT_KEYS:
        if key in header:
            line, vals = header[key]
            out["meta"][key] = [rd.number(v, line, key) for v in vals]
    if "prob_density_marks" in header:
        line, vals = header["prob_density_marks"]
        if out["svm_type"] != "one_class":
            raise rd.error(line, "prob_density_marks is for one_class only")
        if len(vals) != N_MARKS:
            raise rd.error(line, f"prob_density_marks has {len(vals)} values, expected {N_MARKS}")


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
) -> tuple[int | None, int | None]:
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
        if toks[0] != _TRAILER or len(toks) < 2:
            continue  # a plain comment
        if toks[1] == "n_features" and len(toks) == 3:
            n_features, n_features_line = rd.integer(toks[2], lno, "n_features"), lno
        elif toks[1] == "index_base" and toks[2:] == ["0"]:
            zero = True
        elif toks[1] == "meta":
            try:
                extra = json.loads(_unescape(text.split("meta", 1)[1]))
            except ValueError as e:
                raise rd.error(lno, f"bad psvm meta JSON: {e}") from None
            if not isinstance(extra, dict):
                raise rd.error(lno, "psvm meta must be a JSON object")
            meta.update(extra)
        else:
            raise rd.error(lno, f"unknown psvm trailer line {' '.join(toks[:2])!r}")
    return n_features, n_features_line, zero

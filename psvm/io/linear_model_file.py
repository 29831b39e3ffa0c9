"""LIBLINEAR's text model format, read and written (the fitted model: :mod:`psvm.sgd.model`).

The file is what LIBLINEAR's ``save_model`` writes, so ``liblinear``'s
``predict`` and ``load_model`` read psvm's SGD models, and psvm reads
LIBLINEAR's classification models::

    solver_type L2R_L1LOSS_SVC_DUAL
    nr_class 2
    label 1 -1
    nr_feature 123
    bias 1
    w
    0.0123
    ...

``w`` has ``nr_feature`` lines (one more, the bias weight, when ``bias >= 0``)
of ``nr_w`` numbers, each followed by a space: ``nr_w = 1`` for two classes
(positive: ``label[0]``), else one column per class in ``label`` order (one-vs-rest, argmax). The
decision value of class c is ``w_c . x + bias * w_c[nr_feature]``. psvm's SGD
solves LIBLINEAR's ``-s 3`` problem (L2-regularised hinge loss), though its
bias is not regularised; the model is written with ``bias 1``, or ``bias -1`` and no bias
row when every intercept is zero (``fit_intercept=False``: LIBLINEAR's model without a bias).
"""

from __future__ import annotations

import os

import numpy as np

from psvm.io.atomic import write_atomic
from psvm.io.model_format import ModelFormatError, file_label, float_text
from psvm.io.model_read import read_model
from psvm.sgd.model import LinearModel

# LIBLINEAR's classification solvers (its solver_type_table); all predict alike.
_CLASSIFIERS = (
    "L2R_LR",
    "L2R_L2LOSS_SVC_DUAL",
    "L2R_L2LOSS_SVC",
    "L2R_L1LOSS_SVC_DUAL",
    "MCSVM_CS",
    "L1R_L2LOSS_SVC",
    "L1R_LR",
    "L2R_LR_DUAL",
)
_OTHERS = ("L2R_L2LOSS_SVR", "L2R_L2LOSS_SVR_DUAL", "L2R_L1LOSS_SVR_DUAL", "ONECLASS_SVM")
_KEYS = ("solver_type", "nr_class", "label", "nr_feature", "bias", "rho")


def write_linear_model(path: str | os.PathLike, model: LinearModel) -> None:
    """Write ``model`` in LIBLINEAR's text format, atomically (temporary file + os.replace).

    Raises
    ------
    ValueError
        If a label is not a 32-bit integer (LIBLINEAR reads labels with ``%d``);
        nothing is written then.
    """
    labels = [file_label(c, "LIBLINEAR") for c in model.classes.tolist()]
    bias = bool(np.any(model.intercept != 0))  # (no intercept: LIBLINEAR's bias -1)
    W = np.vstack([model.coef.T, model.intercept[None, :]]) if bias else model.coef.T
    lines = [
        f"solver_type {model.solver_type}",
        f"nr_class {len(labels)}",
        "label " + " ".join(labels),
        f"nr_feature {model.n_features}",
        f"bias {1 if bias else -1}",
        "w",
    ]
    lines += ["".join(float_text(v) + " " for v in row) for row in W.tolist()]
    with write_atomic(path, encoding="ascii", newline="\n") as f:
        f.write("\n".join(lines) + "\n")


def is_linear_model_file(path: str | os.PathLike) -> bool:
    """True when the file starts like a LIBLINEAR model (``solver_type ...``)."""
    with open(path, "rb") as f:
        return f.readline().split(b" ", 1)[0].strip() == b"solver_type"


def read_any_model(path: str | os.PathLike):
    """A LIBLINEAR model (:class:`LinearModel`) or a LIBSVM one (:class:`psvm.model.SVCModel`),
    told apart by the first line, as ``psvm-predict`` takes either."""
    return read_linear_model(path) if is_linear_model_file(path) else read_model(path)


def read_linear_model(path: str | os.PathLike) -> LinearModel:
    """Read a LIBLINEAR classification model; errors name the file and line.

    Raises
    ------
    ModelFormatError
        On a malformed or inconsistent file, or a regression / one-class model.
    """
    path = os.fspath(path)
    with open(path, encoding="ascii", errors="replace") as f:
        text = _Text(path, f.read().splitlines())
    header, w_line = text.header()
    solver, labels, d, bias = text.fields(header, w_line)
    nr_w = 1 if labels.size == 2 and solver != "MCSVM_CS" else labels.size
    W = text.weights(w_line, d, bias, nr_w)
    coef = W[:d].T.copy()
    intercept = W[d] * bias if bias >= 0 else np.zeros(nr_w)
    return LinearModel(coef, intercept, labels, solver_type=solver)


class _Text:
    """A LIBLINEAR model file's lines, read part by part; errors name the file and line."""

    def __init__(self, path: str, lines: list[str]):
        self.path, self.lines = path, lines

    def error(self, lno: int, reason: str) -> ModelFormatError:
        return ModelFormatError(self.path, lno, reason)

    def number(self, tok: str, lno: int, what: str, kind=float):
        try:
            if "_" in tok:  # int() and float() accept '1_0'; LIBLINEAR's strtod does not
                raise ValueError
            v = kind(tok)
        except ValueError:
            raise self.error(
                lno, f"{what} is not {'an integer' if kind is int else 'a number'}: {tok!r}"
            ) from None
        if kind is float and not np.isfinite(v):
            raise self.error(lno, f"{what} is not finite: {tok!r}")
        return v

    def header(self) -> tuple[dict[str, tuple[int, list[str]]], int]:
        """The header's fields (key: line number, values) and the 'w' line's number."""
        header: dict[str, tuple[int, list[str]]] = {}
        w_line = 0
        for lno, text in enumerate(self.lines, 1):
            toks = text.split()
            if toks == ["w"]:
                w_line = lno
                break
            if not toks or toks[0] not in _KEYS:
                raise self.error(lno, f"unknown header line {text.strip()!r}")
            if toks[0] in header:
                raise self.error(lno, f"duplicate header field {toks[0]!r}")
            header[toks[0]] = (lno, toks[1:])
        if "solver_type" in header:
            lno, vals = header["solver_type"]
            if len(vals) == 1 and vals[0] not in _CLASSIFIERS:
                kind = "not a classification" if vals[0] in _OTHERS else "an unknown"
                raise self.error(
                    lno, f"solver_type {vals[0]!r} is {kind} solver; psvm reads classifiers only"
                )
        if not w_line:
            raise self.error(max(len(self.lines), 1), "end of file before the 'w' line")
        return header, w_line

    def fields(self, header: dict, w_line: int) -> tuple[str, np.ndarray, int, float]:
        """The solver, the labels, nr_feature and the bias, checked."""
        for key in ("solver_type", "nr_class", "nr_feature", "bias"):
            if key not in header or len(header[key][1]) != 1:
                raise self.error(header.get(key, (w_line,))[0], f"{key} needs exactly one value")
        lno, (tok,) = header["nr_class"]
        k = self.number(tok, lno, "nr_class", int)
        if k < 2:
            raise self.error(lno, f"nr_class must be >= 2, got {k}")
        if "label" not in header or len(header["label"][1]) != k:
            raise self.error(
                header.get("label", (w_line,))[0], f"label needs {k} values (nr_class)"
            )
        lno, toks = header["label"]
        labels = np.array([self.number(t, lno, "label", int) for t in toks], dtype=np.int64)
        lno, (tok,) = header["nr_feature"]
        d = self.number(tok, lno, "nr_feature", int)
        if d < 0:
            raise self.error(lno, f"nr_feature must be >= 0, got {d}")
        bias = self.number(header["bias"][1][0], header["bias"][0], "bias")
        return header["solver_type"][1][0], labels, d, bias

    def weights(self, w_line: int, d: int, bias: float, nr_w: int) -> np.ndarray:
        """The lines of ``nr_w`` weights after the 'w' line, one a feature and one for the bias
        if ``bias >= 0``, and nothing after."""
        rows = d + (1 if bias >= 0 else 0)
        lines, W = self.lines, np.empty((rows, nr_w))
        for r in range(rows):
            lno = w_line + 1 + r
            if lno > len(lines):
                raise self.error(lno, f"file ends after {r} weight lines, expected {rows}")
            toks = lines[lno - 1].split()
            if len(toks) != nr_w:
                raise self.error(lno, f"expected {nr_w} weight(s), got {len(toks)}")
            W[r] = [self.number(t, lno, "a weight") for t in toks]
        for lno in range(w_line + rows + 1, len(lines) + 1):
            if lines[lno - 1].strip():
                raise self.error(lno, f"more weight lines than nr_feature {d}")
        return W

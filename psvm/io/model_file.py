"""LIBSVM's text model format, written atomically (the format: :mod:`psvm.io.model_format`;
read back, validated: :mod:`psvm.io.model_read`).
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

import numpy as np

from psvm.io.atomic import write_atomic
from psvm.io.model_format import (
    KEPT_KEYS,
    KERNEL_FIELDS,
    KERNEL_TO_FILE,
    TRAILER,
    ModelFormatError,
    escape_trailer,
    file_label,
    float_text,
)
from psvm.io.model_read import read_model
from psvm.model import COUPLING_ORDER, SVCModel

# (the reader too: one import for both ways)
__all__ = ["ModelFormatError", "read_model", "sv_lines", "write_model"]


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"meta value of type {type(obj).__name__} is not JSON serializable")


def _header_lines(model: SVCModel) -> list[str]:
    """The header exactly as LIBSVM's svm_save_model orders and formats it (no ``label``
    and ``nr_sv`` lines for the types without classes)."""
    labels = [file_label(c) for c in model.classes.tolist()]
    kernel = KERNEL_TO_FILE[model.kernel]
    lines = [f"svm_type {model.svm_type}", f"kernel_type {kernel}"]
    for key in KERNEL_FIELDS[kernel]:
        v = getattr(model, key)
        lines.append(f"{key} {v}" if key == "degree" else f"{key} {float_text(v)}")
    lines += [
        f"nr_class {model.n_classes}",
        f"total_sv {model.support_vectors.shape[0]}",
        " ".join(["rho", *map(float_text, model.rho.tolist())]),
    ]
    if model.is_classifier:
        lines.append(" ".join(["label", *labels]))
    for key in KEPT_KEYS:
        if key in model.meta:
            lines.append(" ".join([key, *map(float_text, np.atleast_1d(model.meta[key]).tolist())]))
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
        lines.append(f"{TRAILER} n_features {model.n_features}")
    if model.index_base == 0:  # (also where no support vector shows index 0)
        lines.append(f"{TRAILER} index_base 0")
    # (a written model is coupled in its own class order, the file's: not the one it came from)
    extra = {k: v for k, v in model.meta.items() if k not in (*KEPT_KEYS, COUPLING_ORDER)}
    if extra:
        text = json.dumps(extra, default=_json_default, sort_keys=True)
        lines.append(f"{TRAILER} meta {escape_trailer(text)}")
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

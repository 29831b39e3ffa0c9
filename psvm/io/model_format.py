"""LIBSVM's text model format: its names, its labels and its errors, shared by the writer
(:mod:`psvm.io.model_file`, atomic) and the reader (:mod:`psvm.io.model_read`, validating).

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

import numbers
import os
import re

import numpy as np

from psvm._params import INT_MAX

# LIBSVM's kernel_type_table names; psvm's names are sklearn's.
FILE_KERNELS = {
    "linear": "linear",
    "polynomial": "poly",
    "rbf": "rbf",
    "sigmoid": "sigmoid",
    "precomputed": "precomputed",
}
KERNEL_TO_FILE = {v: k for k, v in FILE_KERNELS.items()}
KERNEL_FIELDS = {  # the header fields each kernel reads (svm_save_model writes them)
    "linear": (),
    "polynomial": ("degree", "gamma", "coef0"),
    "rbf": ("gamma",),
    "sigmoid": ("gamma", "coef0"),
    "precomputed": (),
}
HEADER_KEYS = (
    "svm_type", "kernel_type", "degree", "gamma", "coef0", "nr_class",
    "total_sv", "rho", "label", "probA", "probB", "prob_density_marks", "nr_sv",
)  # fmt: skip
# Probability header fields, kept in ``meta`` (and written back in their place).
KEPT_KEYS = ("probA", "probB", "prob_density_marks")
TRAILER = "#psvm"


class ModelFormatError(ValueError):
    """A model file that cannot be read, with the file and 1-based line to blame."""

    def __init__(self, path: str | os.PathLike, line: int, reason: str) -> None:
        self.path = os.fspath(path)
        self.line = line
        self.reason = reason
        super().__init__(f"{self.path}:{line}: {reason}")

    def __reduce__(self):  # the fields, and what was set on the error (``collective``)
        return (type(self), (self.path, self.line, self.reason), self.__dict__)


def float_text(x: float) -> str:
    """Shortest text that reads back as the same float64 (as exact as %.17g, shorter)."""
    return repr(float(x))


def escape_trailer(text: str) -> str:
    """Keep ':' out of the trailer (LIBSVM counts them) in a reversible way."""
    return text.replace("%", "%25").replace(":", "%3A")


def unescape_trailer(text: str) -> str:
    return re.sub("%(25|3A)", lambda m: "%" if m.group(1) == "25" else ":", text)


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

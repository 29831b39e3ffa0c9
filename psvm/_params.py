"""Parameter tables and validation, shared by the estimators and the CLI.

Every rank validates the same values identically, so every rank raises the
same error before any collective starts. The solver trusts the frozen config.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field, fields
from functools import cached_property
from types import SimpleNamespace

from psvm.svc.elimination import POLICIES

FIRST_ORDER, SECOND_ORDER = 1, 2
# kernel names and the integer codes the compiled kernels take (psvm.kernels), then LIBSVM's
# -t 4, whose values are read from the rows of a Gram matrix (psvm.gram)
KERNELS = {"linear": 0, "poly": 1, "rbf": 2, "sigmoid": 3}
PRECOMPUTED = 4
ALL_KERNELS = {**KERNELS, "precomputed": PRECOMPUTED}
# the elimination policies' names (psvm.svc.elimination.POLICIES) and reconstruction modes
HEURISTICS = tuple(POLICIES)
# the default: least time against 'none' over a9a, w8a, ijcnn1, skin_nonskin at P = 1, 2
# (geometric mean; docs/heuristics.md)
DEFAULT_HEURISTIC = "frequent"
RECONSTRUCTIONS = ("single", "multi", "approximate")
# the default reconstruction per svm_type: 'multi' for the regressors, where a row eliminated
# by mistake and found at the end makes the long end game run again (docs/performance.md:
# "Why epsilon-SVR took more iterations than LIBSVM")
REGRESSORS = ("epsilon_svr", "nu_svr")
CLASSIFIERS = ("c_svc", "nu_svc")  # the types with labels, one-vs-one (LIBSVM's nr_class)
SELECTIONS = {"first": FIRST_ORDER, "second": SECOND_ORDER}


def default_reconstruction(svm_type: str) -> str:
    """'multi' for epsilon-SVR and nu-SVR, 'single' for the other types."""
    return "multi" if svm_type in REGRESSORS else "single"


class ParameterError(ValueError):
    """A parameter is out of range; the message names it and the value received."""

    collective = True  # every rank validates the same values: all raise it alike


# LIBSVM's svm_type names, in the order of svm-train's -s codes
SVM_TYPES = ("c_svc", "nu_svc", "one_class", "epsilon_svr", "nu_svr")


@dataclass(frozen=True)
class SVCConfig:
    """Validated kernel SVM settings; ``gamma`` is a resolved number."""

    svm_type: str = "c_svc"
    C: float = 1.0
    nu: float = 0.5
    epsilon: float = 0.1
    kernel: str = "rbf"
    degree: int = 3
    gamma: float = 0.0
    coef0: float = 0.0
    tol: float = 1e-3
    cache_size: float = 200.0
    max_iter: int | None = -1  # -1: none (scikit-learn); None: svm-train's max(1e7, 100 l)
    selection: str = "second"
    heuristic: str = DEFAULT_HEURISTIC
    reconstruction: str = "single"
    class_weight: dict = field(default_factory=dict)
    verbose: bool = False

    @property
    def kernel_id(self) -> int:
        return ALL_KERNELS[self.kernel]

    @property
    def selection_id(self) -> int:
        return SELECTIONS[self.selection]


# LIBSVM's C int: the model file's degree, the largest feature index a data or model file
# may hold, and the bound of scikit-learn's libsvm binding
INT_MAX = 2**31 - 1


def check_number(
    name, value, *, kind=numbers.Real, low=None, low_open=False, high=None, allowed=()
):
    if value in allowed and isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, kind):
        extra = f" or one of {list(allowed)}" if allowed else ""
        what = kind.__name__.lower()
        article = "an" if what[0] in "aeiou" else "a"
        raise ParameterError(f"{name} must be {article} {what}{extra}, got {value!r}")
    if value != value or value in (float("inf"), float("-inf")):
        raise ParameterError(f"{name} must be finite, got {value!r}")
    if low is not None and (value <= low if low_open else value < low):
        op = ">" if low_open else ">="
        raise ParameterError(f"{name} must be {op} {low}, got {value!r}")
    if high is not None and value > high:
        raise ParameterError(f"{name} must be <= {high}, got {value!r}")
    return value


def _is_bool(value) -> bool:
    return type(value).__name__ in ("bool", "bool_")  # (numpy's bool without importing numpy)


def check_bool(name: str, value):
    """``value`` as a bool if it is one (numpy's too), as scikit-learn's 'boolean' constraint."""
    if not _is_bool(value):
        raise ParameterError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def check_verbose(value) -> bool:
    """scikit-learn's 'verbose' constraint: a bool or an int >= 0 (psvm prints or not)."""
    if _is_bool(value):
        return bool(value)
    return bool(check_number("verbose", value, kind=numbers.Integral, low=0))


def _choice(name, value, options):
    if value not in options:
        raise ParameterError(f"{name} must be one of {sorted(options)}, got {value!r}")
    return value


def validate_svc_params(
    *,
    svm_type="c_svc",
    nu=0.5,
    epsilon=0.1,
    C=1.0,
    kernel="rbf",
    degree=3,
    gamma="scale",
    coef0=0.0,
    tol=1e-3,
    cache_size=200.0,
    max_iter=-1,
    selection="second",
    heuristic=DEFAULT_HEURISTIC,
    reconstruction=None,
    class_weight=None,
    verbose=False,
) -> dict:
    """Check the kernel SVM parameters; returns them normalised (gamma may stay a string).

    Use :func:`make_svc_config` to resolve ``gamma`` once the data is known.
    ``nu`` is used (and checked, as LIBSVM's svm_check_parameter does) by
    nu_svc, one_class and nu_svr only, ``epsilon`` by epsilon_svr only.
    ``reconstruction`` None is the type's default (:func:`default_reconstruction`).
    """
    svm_type = _choice("svm_type", svm_type, SVM_TYPES)
    if svm_type in ("nu_svc", "one_class", "nu_svr"):
        nu = check_number("nu", nu, low=0, low_open=True, high=1)
    if svm_type == "epsilon_svr":
        epsilon = check_number("epsilon", epsilon, low=0)
    out = dict(
        svm_type=svm_type,
        nu=float(nu),
        epsilon=float(epsilon),
        C=float(check_number("C", C, low=0, low_open=True)),
        kernel=_choice("kernel", kernel, ALL_KERNELS),
        degree=int(check_number("degree", degree, kind=numbers.Integral, low=0, high=INT_MAX)),
        gamma=check_number("gamma", gamma, low=0, allowed=("scale", "auto")),
        coef0=float(check_number("coef0", coef0)),
        tol=float(check_number("tol", tol, low=0, low_open=True)),
        cache_size=float(check_number("cache_size", cache_size, low=0, low_open=True)),
        max_iter=None
        if max_iter is None
        else int(check_number("max_iter", max_iter, kind=numbers.Integral, low=-1)),
        selection=_choice("selection", selection, SELECTIONS),
        heuristic=_choice("heuristic", heuristic, HEURISTICS),
        reconstruction=_choice(
            "reconstruction",
            default_reconstruction(svm_type) if reconstruction is None else reconstruction,
            RECONSTRUCTIONS,
        ),
        verbose=check_verbose(verbose),
    )
    weights = {} if class_weight is None else class_weight
    if not isinstance(weights, dict):
        raise ParameterError(f"class_weight must be a dict or None, got {class_weight!r}")
    check_class_weights(weights)
    out["class_weight"] = {k: float(v) for k, v in weights.items()}
    return out


def check_class_weights(weights: dict, zero_ok: bool = False) -> None:
    """Every class weight finite and positive (the kernel and SGD faces, estimator and CLI);
    ``zero_ok``: 0 too (the SGD faces, as SGDClassifier: the class's rows then weigh nothing)."""
    for label, w in weights.items():
        check_number(f"class_weight[{label!r}]", w, low=0, low_open=not zero_ok)


def unknown_weight_labels(class_weight: dict, classes) -> list[str]:
    """LIBSVM's warning for each ``class_weight`` label that is no class: ignored, not an error.

    svm.cpp prints ``WARNING: class label %d specified in weight is not found``
    and trains on; both faces and both solvers say the same.
    """
    known = set(classes)
    return [
        f"class label {_label_text(label)} specified in weight is not found"
        for label in class_weight
        if label not in known
    ]


def _label_text(label) -> str:
    """A label as LIBSVM's ``%d`` shows it when it is a whole number."""
    whole = isinstance(label, numbers.Real) and not isinstance(label, bool)
    return str(int(label)) if whole and float(label).is_integer() else str(label)


def resolve_gamma(gamma, n_features: int, x_var: float) -> float:
    """scikit-learn's rule: 'scale' is 1 / (n_features * X.var()), 'auto' 1 / n_features."""
    if gamma == "auto":
        return 1.0 / max(n_features, 1)
    if gamma == "scale":
        return 1.0 / (n_features * x_var) if x_var > 0 and n_features > 0 else 1.0
    return float(gamma)


def make_svc_config(params: dict, n_features: int, x_var: float) -> SVCConfig:
    """The config with gamma resolved (0 for a precomputed kernel, which has none, as
    scikit-learn's ``_gamma``)."""
    gamma = params["gamma"]
    gamma = 0.0 if params["kernel"] == "precomputed" else resolve_gamma(gamma, n_features, x_var)
    return SVCConfig(**{**params, "gamma": gamma})


# -- parallel SGD linear SVM ------------------------------------------------------

SGD_SCHEDULES = ("pegasos", "optimal", "constant", "epoch")  # codes: psvm.sgd.steps.SCHEDULES


@dataclass(frozen=True)
class SGDConfig:
    """Validated settings of the parallel SGD linear SVM (see :class:`psvm.SGDSVC`).

    ``sync_every`` is a period in local samples or ``"auto"``; ``average`` is
    the local step at which averaging starts (0: no averaging).
    """

    alpha: float = 1e-4
    learning_rate: str = "optimal"
    eta0: float = 0.01
    sync_every: int | str = "auto"
    msf_target: float = 0.1
    max_iter: int = 1000
    tol: float | None = 1e-3
    n_iter_no_change: int = 5
    early_stopping: bool = False
    validation_fraction: float = 0.1
    shuffle: bool = True
    average: int = 1
    fit_intercept: bool = True
    intercept_decay: float = 1.0
    verbose: bool = False

    @cached_property
    def schedule_id(self) -> int:
        from psvm.sgd.steps import SCHEDULES

        return SCHEDULES[self.learning_rate]


_SGD_DEFAULTS = {f.name: f.default for f in fields(SGDConfig)}


def validate_sgd_params(**params) -> SGDConfig:
    """Check the SGD parameters once (every rank alike) and freeze them into an SGDConfig.

    Takes SGDConfig's fields by name (keywords only); missing ones get its
    defaults, which :class:`psvm.SGDSVC` repeats in its signature.
    ``average`` follows scikit-learn: True starts averaging at the first step,
    an integer n at local step n, False (or 0) disables it.
    """
    unknown = sorted(params.keys() - _SGD_DEFAULTS.keys())
    if unknown:
        raise TypeError(f"validate_sgd_params() got unexpected keyword arguments {unknown}")
    p = SimpleNamespace(**{**_SGD_DEFAULTS, **params})
    average, tol, msf_target, eta0 = p.average, p.tol, p.msf_target, p.eta0
    if not isinstance(average, (bool, numbers.Integral)) or average < 0:
        raise ParameterError(f"average must be a bool or an integer >= 0, got {average!r}")
    if tol is not None:
        tol = float(check_number("tol", tol, low=0))
    period = check_number(
        "sync_every", p.sync_every, kind=numbers.Integral, low=1, allowed=("auto",)
    )
    out = SGDConfig(
        alpha=float(check_number("alpha", p.alpha, low=0, low_open=True)),
        learning_rate=_choice("learning_rate", p.learning_rate, SGD_SCHEDULES),
        eta0=float(check_number("eta0", eta0, low=0)),
        sync_every=period if period == "auto" else int(period),
        msf_target=float(check_number("msf_target", msf_target, low=0, low_open=True)),
        max_iter=int(check_number("max_iter", p.max_iter, kind=numbers.Integral, low=1)),
        tol=tol,
        n_iter_no_change=int(
            check_number("n_iter_no_change", p.n_iter_no_change, kind=numbers.Integral, low=1)
        ),
        early_stopping=check_bool("early_stopping", p.early_stopping),
        validation_fraction=float(
            check_number("validation_fraction", p.validation_fraction, low=0, low_open=True)
        ),
        shuffle=check_bool("shuffle", p.shuffle),
        average=int(average),
        fit_intercept=check_bool("fit_intercept", p.fit_intercept),
        intercept_decay=float(
            check_number("intercept_decay", p.intercept_decay, low=0, low_open=True)
        ),
        verbose=check_verbose(p.verbose),
    )
    if out.validation_fraction >= 1:
        raise ParameterError(
            f"validation_fraction must be < 1 (a share of the rows), got {p.validation_fraction!r}"
        )
    if out.msf_target >= 1:
        raise ParameterError(f"msf_target must be < 1 (a share of the time), got {msf_target!r}")
    if out.learning_rate == "constant" and out.eta0 <= 0:
        raise ParameterError(f"eta0 must be > 0 with learning_rate='constant', got {eta0!r}")
    return out

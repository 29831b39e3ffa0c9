"""The faces' outputs from a fitted model: one-vs-rest scores, primal weights, run statistics."""

from __future__ import annotations

import numpy as np

from psvm.stats import hit_rate


def ovr_decision(dec: np.ndarray, k: int) -> np.ndarray:
    """One-vs-rest scores from one-vs-one values, as scikit-learn's SVC computes them.

    Votes (pair (i, j) votes for i when its value is >= 0) plus the summed
    confidences squashed into (-1/3, 1/3), so they only break ties in votes.
    """
    votes = np.zeros((dec.shape[0], k))
    conf = np.zeros((dec.shape[0], k))
    p = 0
    for i in range(k):
        for j in range(i + 1, k):
            conf[:, i] += dec[:, p]
            conf[:, j] -= dec[:, p]
            votes[:, i] += dec[:, p] >= 0
            votes[:, j] += dec[:, p] < 0
            p += 1
    return votes + conf / (3 * (np.abs(conf) + 1))


def fit_report(report: dict, model, n_samples: int, n_features: int) -> dict:
    """The reduced run statistics plus the fit's totals, as plain JSON types."""
    report["values"].update(
        n_samples=n_samples,
        n_features=n_features,
        n_support=int(model.support_vectors.shape[0]),
        objective=model.meta["objective"],
        cache_hit_rate=hit_rate(report["counts"]),
        **{key: model.meta[key] for key in ("heuristic", "reconstruction", "approximate")},
    )
    return jsonable(report)


_PLAIN = frozenset({int, float, str, bool, type(None)})


def jsonable(obj):
    """Plain Python containers and numbers only, so that ``json.dumps`` takes it."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (list, tuple)):
        if all(map(_PLAIN.__contains__, map(type, obj))):  # a trace: plain already, keep it
            return list(obj)
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def linear_coef(model) -> np.ndarray:
    """Primal weights sum_i coef_i x_i of each class pair of a linear-kernel model (LIBSVM sign)."""
    start = np.concatenate(([0], np.cumsum(model.n_support)))
    SV, coef, k = model.support_vectors, model.dual_coef, model.n_classes
    rows = []
    for i in range(k):
        for j in range(i + 1, k):
            si, sj = slice(start[i], start[i + 1]), slice(start[j], start[j + 1])
            rows.append(np.ravel(coef[j - 1, si] @ SV[si] + coef[i, sj] @ SV[sj]))
    return np.array(rows).reshape(len(rows), SV.shape[1])

"""psvm.SVC against sklearn.svm.SVC (LIBSVM inside) on real data, in one process."""

import numpy as np
import pytest
from sklearn import svm

import psvm
from tests._svm import load_head, pair_objectives

CASES = {
    # name: (file, n_rows, params, test rows)
    "heart_scale": ("heart_scale.xz", None, dict(C=1.0, gamma=0.05), None),
    "a9a-8000": ("a9a.xz", 8000, dict(C=1.0, gamma=0.05), "a9a.t.xz"),
    "usps.t": ("usps.t.xz", None, dict(C=10.0, gamma="scale"), None),
    "heart-linear": ("heart_scale.xz", None, dict(C=0.5, kernel="linear"), None),
    "heart-poly": ("heart_scale.xz", None, dict(C=1.0, kernel="poly", gamma=0.1, coef0=1.0), None),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def fitted(request, shared_data):
    name = request.param
    train, n_rows, params, test = CASES[name]
    X, y = load_head(shared_data / train, n_rows)
    if test is None:
        Xt, yt = X, y
    else:
        Xt, yt = load_head(shared_data / test, 4000, n_features=X.shape[1])
    ours = psvm.SVC(**params).fit(X, y)
    ref = svm.SVC(**params, shrinking=False).fit(X, y)
    return name, params, X, Xt, ours, ref


def test_dual_objective_within_1e3_relative(fitted):
    name, params, X, _, ours, ref = fitted
    g = ours._gamma
    kw = dict(kernel=params.get("kernel", "rbf"), gamma=g, coef0=params.get("coef0", 0.0))
    a = pair_objectives(ours.dual_coef_, ours.support_vectors_, ours.n_support_, **kw)
    b = pair_objectives(ref.dual_coef_, ref.support_vectors_, ref.n_support_, **kw)
    np.testing.assert_allclose(a, b, rtol=1e-3)
    np.testing.assert_allclose(ours._model.meta["objective"], a, rtol=1e-6)


def test_predictions_agree(fitted):
    name, _, _, Xt, ours, ref = fitted
    agree = np.mean(ours.predict(Xt) == ref.predict(Xt))
    assert agree >= 0.999, f"{name}: predictions agree on {agree:.4%}"


def test_support_vector_counts_within_2_percent(fitted):
    _, _, _, _, ours, ref = fitted
    assert abs(ours.n_support_.sum() - ref.n_support_.sum()) <= 0.02 * ref.n_support_.sum()
    assert (ours.classes_ == ref.classes_).all()

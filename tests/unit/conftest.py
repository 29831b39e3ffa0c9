"""Unit-test fixtures: small real data sets from shared/data, parsed by LIBSVM's own reader."""

import pytest

from tests._svm import libsvm_problem


@pytest.fixture(scope="module")
def heart(shared_data, tmp_path_factory):
    """heart_scale: 270 rows, 13 features, two classes."""
    dst = tmp_path_factory.mktemp("data") / "heart_scale"
    return libsvm_problem(shared_data / "heart_scale.xz", dst)


@pytest.fixture(scope="module")
def usps(shared_data, tmp_path_factory):
    """The first 600 rows of usps.t: 256 features, ten classes."""
    dst = tmp_path_factory.mktemp("data") / "usps.t"
    return libsvm_problem(shared_data / "usps.t.xz", dst, 600)

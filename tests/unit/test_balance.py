"""How the ranks deal their windows' rows out again (psvm.svc.balance)."""

import numpy as np
import pytest

from psvm.svc.balance import BALANCE, deal, destinations


@pytest.mark.parametrize("sizes", [[10, 2], [0, 9, 3], [7, 0, 0, 1], [1, 1, 1, 30], [5, 3]])
def test_each_rank_gets_an_equal_contiguous_part(sizes):
    parts = deal(sizes)
    assert parts is not None
    total, P = sum(sizes), len(sizes)
    np.testing.assert_array_equal(parts.sum(axis=1), sizes)  # every row goes somewhere once
    np.testing.assert_array_equal(parts.sum(axis=0), np.diff(np.arange(P + 1) * total // P))
    order = np.concatenate([destinations(parts, r) for r in range(P)])
    assert (np.diff(order) >= 0).all()  # in global order: lower ranks' parts first


def test_even_windows_stay():
    assert deal([100, 100]) is None
    assert deal([int(100 * BALANCE), 100]) is None  # within the tolerance
    assert deal([0, 0, 0]) is None
    assert deal([1, 0]) is None and deal([3, 0, 0, 0]) is None  # fewer rows than ranks
    assert deal([5]) is None


def test_a_rank_lends_its_first_rows_down_and_its_last_rows_up():
    parts = deal([0, 9, 3])
    np.testing.assert_array_equal(parts, [[0, 0, 0], [4, 4, 1], [0, 0, 3]])
    np.testing.assert_array_equal(destinations(parts, 1), [0] * 4 + [1] * 4 + [2])

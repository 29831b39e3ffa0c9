import numpy as np

from psvm.svc.cache import GHOSTS_PER_SLOT, LIMIT, META, SLOTS, START_BYTES, ColumnCache


def test_lru_evicts_least_recently_used_and_counts():
    cache = ColumnCache(n_local=1000, n_global=10, cache_mb=3 * 8000 / 2**20)  # 3 columns
    for g in (1, 2, 3):
        col, hit, _ = cache.get(g)
        assert not hit
        col[:] = g
    col, hit, missing = cache.get(1)  # 1 becomes most recent
    assert hit and missing is None and (col == 1).all()
    cache.get(4)  # evicts 2
    assert cache.get(3)[1] and cache.get(1)[1]
    assert not cache.get(2)[1]
    assert cache.hits == 3 and cache.misses == 5


def test_columns_follow_the_window():
    """Cut the window, then let rows rejoin: values move, the new rows are reported missing."""
    cache = ColumnCache(n_local=6, n_global=6, cache_mb=1)
    col, _, _ = cache.get(7)
    col[:] = np.arange(6) * 10.0  # window = local rows 0..5
    cache.relayout(np.array([1, 3, 4]))  # window = rows 1, 3, 4
    cache.get(8)[0][:] = [-1.0, -3.0, -4.0]  # computed for the new window
    cache.relayout(np.array([0, -1, 1, 2, -1]))  # rows 1, 2 (new), 3, 4, 5 (new)
    col, hit, missing = cache.get(8)
    assert hit and missing.tolist() == [1, 4] and col[[0, 2, 3]].tolist() == [-1.0, -3.0, -4.0]
    assert cache.get(8)[2] is None  # moved once, up to date since
    assert not cache.get(7)[1]  # unused for a whole window: dropped (moves happen on use)


def test_a_smaller_window_fits_more_columns():
    """As in LIBSVM, columns cost their window's rows: after a cut, more of them fit."""
    cache = ColumnCache(n_local=1000, n_global=100, cache_mb=4 * 8000 / 2**20)  # 4 columns
    for g in range(4):
        cache.get(g)[0][:] = g
    cache.relayout(np.arange(0, 1000, 4))  # a quarter of the rows stay
    for g in range(4):  # moved to the new window: each now costs 250 rows
        col, hit, missing = cache.get(g)
        assert hit and missing is None and col.size == 250 and (col == g).all()
    for g in range(4, 16):
        assert not cache.get(g)[1]
    assert all(cache.get(g)[1] for g in range(16))  # 16 columns of 250 rows fit
    assert cache.used <= cache.budget


def test_a_window_of_borrowed_rows_gets_the_budget():
    """A rank that owns 10 rows can borrow 600 from other ranks (psvm.svc.balance): its
    cache, sized by its own 10 rows' kernel matrix (16 columns of 600), may grow to the
    budget, 218 columns, not to 16."""
    cache = ColumnCache(n_local=10, n_global=1000, cache_mb=1)  # 131,072 floats
    assert cache.budget == 10 * 1000
    cache.relayout(np.full(600, -1))
    assert cache.budget == 2**20 // 8 and cache.arrays[META][SLOTS] == 218
    cache.get(0)[0][:] = 1.0
    cache.relayout(np.arange(600))  # the next window: a pool of that size again
    assert cache.arrays[META][SLOTS] == 218 and cache.arrays[0].size >= 218 * 600
    assert cache.get(0)[1]


def test_at_least_two_columns():
    cache = ColumnCache(n_local=10**6, n_global=5, cache_mb=0.001)
    cache.get(0)[0][:] = 0.0
    cache.get(1)
    assert cache.get(0)[1] and cache.get(1)[1]


def test_empty_shard():
    cache = ColumnCache(n_local=0, n_global=3, cache_mb=1)
    col, hit, _ = cache.get(0)
    assert col.shape == (0,) and not hit
    assert cache.get(0)[1]


def test_empty_window_then_rows_rejoin():
    """A rank whose rows all left, then some came back: a carried column reports them missing."""
    cache = ColumnCache(n_local=4, n_global=4, cache_mb=1)
    cache.get(1)[0][:] = [1.0, 2.0, 3.0, 4.0]
    cache.relayout(np.array([], dtype=np.int64))  # every row left the window
    col, hit, _ = cache.get(2)  # computed for the empty window
    assert col.size == 0 and not hit
    cache.relayout(np.array([-1, -1, -1]))  # three rows rejoin
    col, hit, missing = cache.get(2)
    assert hit and col.size == 3 and missing.tolist() == [0, 1, 2]
    assert not cache.get(1)[1]  # unused while the window was empty: dropped


def test_columns_that_grow_stay_within_the_budget():
    cache = ColumnCache(n_local=1000, n_global=100, cache_mb=4 * 8000 / 2**20)  # 4 columns
    cache.relayout(np.arange(0, 1000, 4))  # 250 rows: 16 columns fit
    for g in range(16):
        cache.get(g)
    cache.relayout(np.concatenate([np.arange(250), np.full(750, -1)]))  # back to 1000 rows
    for g in range(16):
        col, _, _ = cache.get(g)
        assert col.size == 1000 and cache.used <= cache.budget
    assert cache.n_columns == 4


def test_the_cache_grows_only_when_columns_come_back():
    """It starts with START_BYTES of columns and takes a slot more per GHOSTS_PER_SLOT
    columns asked for again soon after their eviction (ghost hits), up to the budget; a
    stream of columns used once leaves it small (its pages cost more to touch than the
    columns to compute)."""
    n = 2 * START_BYTES // 8  # one column is twice START_BYTES: the cache starts at 2
    cache = ColumnCache(n_local=n, n_global=300, cache_mb=6 * n * 8 / 2**20)  # 6 at most
    for g in range(50):  # used once each
        assert not cache.get(g)[1]
    assert cache.n_columns == 2 and cache.arrays[META][LIMIT] == 2
    cycle = [100, 101, 102]  # in 2 slots, each column after the first three is a ghost hit
    for t in range(3 + GHOSTS_PER_SLOT - 1):
        assert not cache.get(cycle[t % 3])[1]
    assert cache.arrays[META][LIMIT] == 2
    cache.get(cycle[(GHOSTS_PER_SLOT + 2) % 3])  # the last ghost hit of a slot
    assert cache.arrays[META][LIMIT] == 3 and cache.n_columns == 3
    assert all(cache.get(g)[1] for g in cycle)  # the cycle fits now
    for _ in range(2 + 3 * GHOSTS_PER_SLOT // 5):  # a cycle of 8: grows to the budget, evicts
        for g in range(200, 208):
            cache.get(g)
    assert cache.arrays[META][LIMIT] == 6 and cache.n_columns == 6
    cache.relayout(np.arange(0, n, 2))  # columns half as wide: the same memory, twice the slots
    assert cache.arrays[META][LIMIT] == 12

import numpy as np

from psvm.cache import ColumnCache


def test_lru_evicts_least_recently_used_and_counts():
    cache = ColumnCache(n_local=1000, n_global=10, cache_mb=3 * 8000 / 2**20)
    assert cache.n_slots == 3
    for g in (1, 2, 3):
        col, hit, _ = cache.get(g)[:3]
        assert not hit
        col[:] = g
    col, hit, _, _ = cache.get(1)  # 1 becomes most recent
    assert hit and (col == 1).all()
    cache.get(4)  # evicts 2
    assert cache.get(3)[1] and cache.get(1)[1]
    assert not cache.get(2)[1]
    assert cache.hits == 3 and cache.misses == 5


def test_at_least_two_columns_and_complete_flag():
    cache = ColumnCache(n_local=10**6, n_global=5, cache_mb=0.001)
    assert cache.n_slots == 2
    cache.get(7)
    assert not cache.get(7)[2]
    cache.mark_complete(7)
    assert cache.get(7)[2]
    cache.get(8)
    cache.revive(np.array([3, 5]))
    assert cache.get(7)[3] is None  # complete columns hold every row already
    assert cache.get(8)[3].tolist() == [3, 5]
    cache.refresh(8)
    assert cache.get(8)[3] is None


def test_empty_shard():
    cache = ColumnCache(n_local=0, n_global=3, cache_mb=1)
    col, hit, _, _ = cache.get(0)
    assert col.shape == (0,) and not hit
    assert np.isfinite(cache.n_slots)

"""gamma='scale', rho and the objective have the same bits for P = 1, 2 and 3 (#16 item 6).

They are sums over all rows; MPI's Allreduce adds the ranks' partial sums in
an order that depends on P, so before, gamma on usps.t differed in its last
bits between P = 1 and 2.
"""

import json

from _helpers import run_mpi


def _bits(shared_data, n: int) -> dict:
    r = run_mpi("run_exact_sums.py", ["--shared-data", shared_data], n, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_model_sums_are_the_same_bits_for_every_p(shared_data):
    one = _bits(shared_data, 1)
    assert len(one["intercept"]) == 45 and len(one["objective"]) == 45
    for n in (2, 3):
        assert _bits(shared_data, n) == one, n

"""Bits that must agree across ranks (#16 items 6 and 8).

gamma='scale', rho and the objective are sums over all rows; MPI's Allreduce
adds the ranks' partial sums in an order that depends on P, so before, gamma
on usps.t differed in its last bits between P = 1 and 2. Every rank recomputes
K_ij and the step, so ranks must also agree on the kernel's arithmetic.
"""

import json

from tests._helpers import run_mpi


def _bits(shared_data, n: int) -> dict:
    r = run_mpi("run_exact_sums.py", ["--shared-data", shared_data], n, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_model_sums_are_the_same_bits_for_every_p(shared_data):
    one = _bits(shared_data, 1)
    assert len(one["intercept"]) == 45 and len(one["objective"]) == 45
    for n in (2, 3):
        assert _bits(shared_data, n) == one, n


def test_ranks_with_other_kernel_arithmetic_refuse_to_train():
    """Every rank recomputes K_ij and the step: a rank whose exp differs must stop the job."""
    r = run_mpi("run_arithmetic_probe.py", [], 2, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    # the ranks' lines may interleave: count, do not split
    assert r.stdout.count("compute exp or tanh with different bits") == 2, r.stdout
    assert "rank 0: the ranks" in r.stdout and "rank 1: the ranks" in r.stdout, r.stdout

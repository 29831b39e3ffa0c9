"""Bits that must agree across ranks (#16 items 6 and 8).

gamma='scale', rho and the objective are sums over all rows; MPI's Allreduce
adds the ranks' partial sums in an order that depends on P, so before, gamma
on usps.t differed in its last bits between P = 1 and 2. Every rank recomputes
K_ij and the step, so ranks must also agree on the kernel's arithmetic.
"""

import json

from tests._helpers import run_mpi


def _fit(shared_data, n: int, *flags: str) -> dict:
    r = run_mpi("run_exact_sums.py", ["--shared-data", shared_data, *flags], n, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_model_sums_are_the_same_bits_for_every_p(shared_data):
    """The ranks solve whole class pairs each, or step through every pair together: the same
    bits. Dealt out, each pair is solved as in one process: the same counters and traces."""
    one = _fit(shared_data, 1)
    assert len(one["bits"]["intercept"]) == 45 and len(one["bits"]["objective"]) == 45
    assert one["stats"]["pairs_dealt"] is None
    for n in (2, 3):
        dealt = _fit(shared_data, n)
        assert dealt["bits"] == one["bits"], n
        assert dealt["stats"] == {**one["stats"], "pairs_dealt": n}, n
    together = _fit(shared_data, 2, "--lockstep")
    assert together["bits"] == one["bits"] and together["stats"]["pairs_dealt"] is None


def test_ranks_with_other_kernel_arithmetic_refuse_to_train():
    """Every rank recomputes K_ij and the step: a rank whose exp differs must stop the job."""
    r = run_mpi("run_arithmetic_probe.py", [], 2, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    # the ranks' lines may interleave: count, do not split
    assert r.stdout.count("compute exp or tanh with different bits") == 2, r.stdout
    assert "rank 0: the ranks" in r.stdout and "rank 1: the ranks" in r.stdout, r.stdout

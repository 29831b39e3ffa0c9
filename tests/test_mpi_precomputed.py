"""kernel='precomputed' and callable kernels in every estimator under mpiexec (#18 item 3):
with psvm's own kernel values in the Gram matrix, the explicit kernel's model and predictions
bit for bit, replicated and sharded, the same for P = 1, 2 and 3."""

import json
from collections import defaultdict

from tests._helpers import run_mpi


def _fits(shared_data, n: int) -> dict:
    r = run_mpi("run_precomputed.py", ["--shared-data", shared_data], n, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_gram_and_callable_give_the_explicit_model_for_every_p(shared_data):
    one = _fits(shared_data, 1)
    forms = defaultdict(dict)
    for case, bits in one.items():
        name, kernel, form, dist = case.split("-")
        forms[name, kernel][form, dist] = bits
    assert len(forms) == 10  # five types, linear and rbf
    for key, bits in forms.items():
        assert len(bits) == 6 and len({tuple(b) for b in bits.values()}) == 1, (key, bits)
    for n in (2, 3):
        assert _fits(shared_data, n) == one, n

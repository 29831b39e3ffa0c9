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


def test_callable_fits_with_a_rank_without_rows():
    """A rank with no rows computes no Gram rows (a kernel may refuse an empty array, as
    scikit-learn's do): the same model for P = 1, 2 and 3, sharded and replicated."""
    runs = [run_mpi("run_callable_rows.py", ["empty"], n, timeout=300) for n in (1, 2, 3)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-3000:]
    fits = [json.loads(r.stdout.strip().splitlines()[-1]) for r in runs]
    assert fits[1] == fits[0] and fits[2] == fits[0]


def test_sharded_callable_input_of_other_types_is_an_agreed_error():
    """Rank 0 passes an array, the others lists: every rank raises the same TypeError,
    with no rank reporting an unexpected error and no abort."""
    r = run_mpi("run_callable_rows.py", ["mixed"], 3, timeout=300, mpi4py_runner=False)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "error: distributed='sharded' with a callable kernel takes X" in r.stdout
    assert "unexpected error" not in r.stderr

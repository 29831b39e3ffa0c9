"""Sample elimination (shrinking) heuristics, from *earliest* to *lazy*.

A bound variable t can leave the active set when its gradient puts it strictly
on the non-violating side of the current global extremes (LIBSVM's
``be_shrunk``): t only in I_up with -y_t G_t < M, or t only in I_low with
-y_t G_t > m. Free variables never leave. The policies below differ only in
*when* they test that rule and *how readily* they act on it. They see the
iteration count, the globally agreed m and M and local arrays, so their
decisions are the same for every number of ranks. The rule itself is
:func:`psvm.svc.engine.eliminate`; :data:`POLICIES` is the one registry of
heuristic names (``psvm._params.HEURISTICS`` is its keys).
"""

from __future__ import annotations

# When the rule may be tested (the compiled loop's codes): never; at every period; once
# m - M < theta * (m - M at the start); once m - M < 100 tol.
NEVER, ALWAYS, GAP_FRACTION, NEAR_TOL = range(4)


class Policy:
    """When to test the elimination rule, and after how many consecutive hits to act.

    Subclasses set ``name`` and override :meth:`period` or :meth:`ready`.
    """

    name = "policy"
    need = 1  # consecutive positive checks before a row leaves
    readiness = ALWAYS  # the compiled loop's form of :meth:`ready`
    theta = 0.0
    unshrink_gap = None  # tol multiple at which LIBSVM reactivates everything once

    def period(self, n_samples: int) -> int:
        return max(1, min(n_samples, 1000))

    def start(self, n_samples: int) -> int:
        """The first iteration at which the rule may be tested."""
        return self.period(n_samples)

    def ready(self, gap: float, gap0: float, tol: float) -> bool:
        return True

    def check_now(self, n_iter: int, n_samples: int, gap: float, gap0: float, tol: float) -> bool:
        return (
            n_iter >= self.start(n_samples)
            and n_iter % self.period(n_samples) == 0
            and self.ready(gap, gap0, tol)
        )

    @property
    def active(self) -> bool:
        return True


class NoElimination(Policy):
    """Parallel baseline: every row stays active."""

    name = "none"
    readiness = NEVER

    def check_now(self, n_iter: int, n_samples: int, gap: float, gap0: float, tol: float) -> bool:
        return False

    @property
    def active(self) -> bool:
        return False


class Earliest(Policy):
    """The most aggressive: test every iteration, act on the first hit."""

    name = "earliest"

    def period(self, n_samples: int) -> int:
        return 1


class Frequent(Policy):
    """Test often, act on confirmed hits: every 50 iterations, the rule held twice in a row,
    once the run is long enough for a window cut to pay.

    Rows leave soon after they settle (no wait for the gap), and the second
    test, 50 iterations later, filters the rows that were only passing through
    the non-violating side (``earliest``'s false positives). A cut and the
    reconstruction that follows cost about 0.3 ms of Python, and each
    eliminated row saves a few ns an iteration, so the first test waits for
    iteration 300000 / n, between 50 and 1000 (LIBSVM's first shrinking point):
    at once on skin_nonskin (245k rows), never on a digits pair (360 rows
    solved in about 116 iterations).
    """

    name = "frequent"
    need = 2

    def period(self, n_samples: int) -> int:
        return min(n_samples, 50)

    def start(self, n_samples: int) -> int:
        return min(1000, max(50, 300_000 // max(n_samples, 1)))


class PercentK(Policy):
    """Test every k% of n iterations (the seed paper's reference code uses 5%)."""

    def __init__(self, k: int):
        self.k = k
        self.name = f"percent-{k}"

    def period(self, n_samples: int) -> int:
        return max(1, n_samples * self.k // 100)


class LibsvmShrinking(Policy):
    """LIBSVM's default: every min(n, 1000) iterations, one full unshrink at m - M <= 10 tol."""

    name = "libsvm"
    unshrink_gap = 10.0


class Streak(Policy):
    """Conservative: act only after the rule held at h consecutive checks."""

    def __init__(self, h: int):
        self.need = h
        self.name = f"streak-{h}"


class GapTriggered(Policy):
    """Lazy: start testing once m - M < theta * (m - M at the start)."""

    name = "gap-triggered"
    readiness = GAP_FRACTION

    def __init__(self, theta: float = 0.1):
        self.theta = theta

    def ready(self, gap: float, gap0: float, tol: float) -> bool:
        return gap < self.theta * gap0


class Lazy(Policy):
    """The laziest: start testing once m - M < 100 tol."""

    name = "lazy"
    readiness = NEAR_TOL

    def ready(self, gap: float, gap0: float, tol: float) -> bool:
        return gap < 100.0 * tol


POLICIES = {
    "none": NoElimination,
    "earliest": Earliest,
    "frequent": Frequent,
    "percent-1": lambda: PercentK(1),
    "percent-5": lambda: PercentK(5),
    "percent-10": lambda: PercentK(10),
    "libsvm": LibsvmShrinking,
    "streak-3": lambda: Streak(3),
    "gap-triggered": GapTriggered,
    "lazy": Lazy,
}

# Reconstruction of eliminated gradients (RECONSTRUCTIONS): once when the active
# set converges ('single'), also when m - M crosses these multiples of tol
# ('multi'), or never ('approximate': the result is flagged as such).
MULTI_GAPS = (1000.0, 100.0, 10.0)


def make_policy(name: str) -> Policy:
    """The policy ``name`` (a key of :data:`POLICIES`, checked by ``psvm._params``)."""
    return POLICIES[name]()

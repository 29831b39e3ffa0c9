"""Model synchronisation frequency (MSF) policies: how many local samples between averages.

A policy sees only values the ranks agree on (costs reduced over ranks, the
global objective), so every rank picks the same period and the ranks call
the same number of collectives. Two policies share one small interface:

- :class:`FixedPeriod`: ``sync_every=N``.
- :class:`AutoMSF`: ``sync_every='auto'``. Communication takes the share
  ``s = T_sync / (T_sync + p T_step)`` of the time when ranks average every
  p samples, so the smallest power of two p with ``s <= target`` is
  ``p >= T_sync (1 - target) / (target T_step)``. The costs are measured
  before the first epoch and again after every epoch. When the evaluated
  (averaged) model's objective, or its validation accuracy, gets worse
  between epochs, the policy halves its ceiling on p: more frequent syncs.
"""

from __future__ import annotations

import math

# Relative worsening of the objective tolerated before backing off (SGD noise).
BACKOFF_RTOL = 1e-3
# Drop in validation accuracy (fraction) tolerated before backing off.
BACKOFF_ACC = 0.005


class FixedPeriod:
    """Average every ``period`` local samples (``sync_every=N``)."""

    measures = False

    def __init__(self, period: int):
        self.started = False
        self.period = int(period)
        self.history: list[dict] = []

    def start(self, n_local_max: int, step_seconds=None, sync_seconds=None) -> int:
        return max(1, min(self.period, max(n_local_max, 1)))

    def end_epoch(
        self, epoch: int, objective: float, val_accuracy=None, step_seconds=None, sync_seconds=None
    ) -> int:
        return self.period

    def state(self) -> dict:
        return {"policy": "fixed", "period": self.period}


class AutoMSF:
    """Pick the sync period from measured costs; back off when the model gets worse.

    Parameters
    ----------
    target : float, default=0.1
        Largest share of the time spent in model averages.
    costs : tuple of float, default=None
        ``(step_seconds, sync_seconds)`` to use instead of measuring (makes
        the choice reproducible, for tests and replays).
    """

    measures = True

    def __init__(self, target: float = 0.1, costs: tuple[float, float] | None = None):
        self.target = float(target)
        self.costs = costs
        self.measures = costs is None
        self.started = False
        self.ceiling = math.inf
        self.period = 1
        self.n_local_max = 1
        self.prev_objective = math.inf
        self.prev_accuracy = None
        self.n_backoff = 0
        self.history: list[dict] = []

    def cost_period(self, step_seconds: float, sync_seconds: float) -> int:
        """Smallest power of two keeping T_sync / (T_sync + p T_step) <= target."""
        if self.costs is not None:
            step_seconds, sync_seconds = self.costs
        if step_seconds <= 0.0:
            return self.n_local_max
        need = sync_seconds * (1.0 - self.target) / (self.target * step_seconds)
        p = 1 if need <= 1.0 else 1 << math.ceil(math.log2(need))
        return int(min(max(p, 1), self.n_local_max))

    def _choose(self, step_seconds, sync_seconds) -> int:
        p = self.cost_period(step_seconds or 0.0, sync_seconds or 0.0)
        if self.ceiling < p:
            p = int(self.ceiling)
        self.period = max(1, p)
        return self.period

    def start(self, n_local_max: int, step_seconds=None, sync_seconds=None) -> int:
        self.n_local_max = max(int(n_local_max), 1)
        p = self._choose(step_seconds, sync_seconds)
        self.history.append(
            dict(
                epoch=0,
                period=p,
                step_seconds=step_seconds,
                sync_seconds=sync_seconds,
                event="start",
            )
        )
        return p

    def end_epoch(
        self, epoch: int, objective: float, val_accuracy=None, step_seconds=None, sync_seconds=None
    ) -> int:
        """Record the epoch's agreed objective (and accuracy); return the next period."""
        worse = objective > self.prev_objective + BACKOFF_RTOL * abs(self.prev_objective)
        if val_accuracy is not None and self.prev_accuracy is not None:
            worse = worse or val_accuracy < self.prev_accuracy - BACKOFF_ACC
        event = "keep"
        if worse and self.period > 1:
            self.ceiling = max(1, self.period // 2)
            self.n_backoff += 1
            event = "backoff"
        self.prev_objective, self.prev_accuracy = objective, val_accuracy
        p = self._choose(step_seconds, sync_seconds)
        self.history.append(
            dict(
                epoch=epoch,
                period=p,
                step_seconds=step_seconds,
                sync_seconds=sync_seconds,
                event=event,
            )
        )
        return p

    def state(self) -> dict:
        return {
            "policy": "auto",
            "target": self.target,
            "period": self.period,
            "n_backoff": self.n_backoff,
            "history": self.history,
        }


def make_policy(sync_every, target: float = 0.1):
    """The policy for a validated ``sync_every`` (an int or ``'auto'``)."""
    return AutoMSF(target) if sync_every == "auto" else FixedPeriod(sync_every)

"""The solver's state in a checkpoint (:mod:`psvm.svc.checkpoint` writes the file).

Saved between two iterations, on every rank at the same one, and read back to resume, also
with another number of ranks: per-variable arrays go to the file in global order.
"""

from __future__ import annotations

import numpy as np

from psvm.svc import engine as E


class Resumable:
    """:class:`~psvm.svc.solver.Solver`'s methods that save its state and restore it."""

    def _to_file(self, a: np.ndarray) -> np.ndarray:
        """Per-variable values (a row each, or a value each) in row-major order (a row's
        variables together), so the ranks' pieces concatenate in global order for every P
        (checkpoints)."""
        if self.per_row == 1:
            return a
        tail = a.shape[1:]
        return a.reshape(self.per_row, -1, *tail).swapaxes(0, 1).reshape(-1, *tail)

    def _from_file(self, a):
        if self.per_row == 1 or not isinstance(a, np.ndarray) or a.ndim == 0:
            return a
        tail = a.shape[1:]
        return a.reshape(-1, self.per_row, *tail).swapaxes(0, 1).reshape(-1, *tail)

    def _save(self, n_iter: int) -> None:
        """Write the state between two iterations (collective)."""
        with self.stats.timer("checkpoint"):
            self._sync()  # (stale rows keep their G and departures: a save changes no value)
            self._home()
            gap0 = float(self.ctl_f[E.GAP0])
            dep = self.departures
            arrays = {
                "alpha": self.alpha,
                "G": self.G,
                "active": self.active.astype(np.int8),
                "streak": self.streak,
                "window": self.in_window.astype(np.int8),
                "epoch": dep.epoch,
            }
            if len(dep):
                arrays["snapshots"] = np.stack(dep.alphas, axis=1)
            scalars = {
                "n_iter": n_iter,
                "gap0": None if np.isnan(gap0) else gap0,
                "gaps": self._gaps,
                "unshrunk": self._unshrunk,
            }
            arrays = {k: self._to_file(v) for k, v in arrays.items()}
            self.checkpoint.save(self.pair, arrays, scalars)
        self.stats.add("n_checkpoint")

    def _restore(self, s: dict) -> None:
        self.alpha[:], self.G[:] = s["alpha"], s["G"]
        self.active[:] = s["active"] != 0
        self.streak[:] = s["streak"]
        self._relayout(np.flatnonzero(self._pairs(s["window"] != 0)))
        if "snapshots" in s:  # the stale rows' departures, as the saving run held them
            self.departures.epoch[:] = s["epoch"]
            self.departures.alphas = [np.array(a) for a in s["snapshots"].T]
        elif s.get("departed"):  # an older file: stale rows saved up to date
            self.departures.reset(np.flatnonzero(~self.in_window), self.alpha)
        self._gaps, self._unshrunk = list(s["gaps"]), bool(s["unshrunk"])
        self.ctl_i[E.N_ITER] = self.ctl_i[E.CLOCK_DONE] = int(s["n_iter"])
        self.ctl_f[E.GAP0] = np.nan if s["gap0"] is None else s["gap0"]
        self.stats.values["resumed_at_iter"] = int(s["n_iter"])

"""Parallel SGD for the linear SVM: local epochs, model averages through ``comm``.

Every rank minimises lambda/2 |w|^2 + 1/n sum_t c_t hinge(y_t (w.x_t + b))
by SGD over its own rows (:func:`psvm.sgd.steps.sgd_steps`). An epoch is a
pass over a seeded local permutation cut into K chunks, the same K on every
rank (K = ceil(n_local_max / period)); after each chunk the ranks replace
their models by the average weighted by the samples each stepped, with one
in-place Allreduce. The period comes from an MSF policy (:mod:`psvm.sgd.msf`).
After every epoch the evaluated model (the average of all ranks' iterates
when averaging, else the agreed current model) gets its real primal
objective on the whole training set, and its validation accuracy if a
validation set is given. With one rank no collective runs at all, so P = 1
is exactly the sequential algorithm, whatever the period.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from psvm._params import SGDConfig
from psvm.sgd import steps
from psvm.sgd.problem import LocalProblem, SGDState
from psvm.stats import Stats


class DivergedError(ValueError):
    """The steps overflowed the model (scikit-learn's SGD: "Floating-point under-/overflow")."""

    collective = True  # decided from the agreed model and objective: raised on every rank


# Samples timed on a scratch copy of the model to measure the cost of one step.
PROBE_STEPS = 256
# Allreduces timed to measure the cost of one model average.
PROBE_SYNCS = 5
# Rows per block of the per-epoch shuffle (see SGDTrainer): 1 would be a full permutation.
SHUFFLE_BLOCK = 32


def hyper_parameters(cfg: SGDConfig) -> np.ndarray:
    hp = np.zeros(steps.N_HP)
    hp[steps.H_LAMBDA] = cfg.alpha
    hp[steps.H_ETA0] = cfg.eta0
    hp[steps.H_T0] = steps.optimal_t0(cfg.alpha)
    hp[steps.H_EPOCH] = 1.0  # (each epoch sets its own; 1 for the steps the MSF probe times)
    hp[steps.H_BIAS_LR] = cfg.intercept_decay if cfg.fit_intercept else 0.0
    hp[steps.H_AVG_START] = float(cfg.average)
    return hp


def block_order(rng: np.random.Generator, n: int, block: int = SHUFFLE_BLOCK) -> np.ndarray:
    """Rows 0..n-1 by blocks of ``block`` consecutive rows, the blocks in random order."""
    n_blocks = -(-n // block)
    order = (rng.permutation(n_blocks)[:, None] * block + np.arange(block)).ravel()
    return order[order < n].astype(np.int64)


class SGDTrainer:
    """Runs epochs of parallel SGD on one rank; every method is collective.

    Shuffling: the local rows are permuted once (a seeded copy), then every
    epoch visits blocks of ``SHUFFLE_BLOCK`` consecutive rows of that copy in
    a fresh random order. Consecutive samples stay unrelated, and the pass
    reads memory almost sequentially: on a9a an epoch takes about a tenth of
    the time of a pass in a full random permutation (cache misses per row).

    Statistics (in ``stats``): counts ``n_iter`` (epochs), ``n_sync``,
    ``n_steps``, ``bytes_sync``, ``n_msf_backoff``; seconds ``compute``
    (local steps), ``pack`` (model in and out of the buffer, O(n_features) per
    sync), ``comm`` (model Allreduces, waiting included),
    ``objective``, ``validation``, ``comm_eval`` and ``calibrate``; per-epoch
    traces ``objective``, ``val_accuracy``, ``period``, ``train_seconds``
    (cumulative ``epochs`` seconds: wall time of the epochs without validation
    scoring), ``comm_seconds``, ``n_sync``.
    """

    def __init__(
        self,
        comm,
        prob: LocalProblem,
        cfg: SGDConfig,
        state: SGDState,
        policy,
        stats: Stats,
        log: Callable[[str], None] | None = None,
    ):
        self.comm, self.prob, self.cfg, self.state = comm, prob, cfg, state
        self.policy, self.stats, self.log = policy, stats, log
        if cfg.shuffle and prob.n_local > 1:
            self.prob = prob = prob.permuted(state.rng.permutation(prob.n_local))
        self.hp = hyper_parameters(cfg)
        k, d = prob.n_models, prob.n_features
        L = k * (d + 1) + 1
        # [Ctrl-C votes | model sync | sums of averaged iterates]: every sync carries the
        # votes (every rank stops after the same sync), the epoch's last one the sums too
        self.buf2 = np.empty(2 * L + 1)
        self.buf, self.avg_buf = self.buf2[1 : L + 1], self.buf2[L + 1 :]
        self._avg_ready = False
        self.W, self.w0 = np.empty((k, d)), np.empty(k)
        self.losses = np.empty(k)
        # per rank: [hinge sums (k), correct, seconds per step, seconds per sync]
        self.evals = np.zeros(k + 3)
        self.evals_all = np.zeros((comm.size, k + 3))
        self.converged = False
        self._no_improvement = 0
        self._best = np.inf
        self._warm_up()
        if not getattr(policy, "started", False):
            self.period = self._start_policy()
            policy.started = True
        else:
            self.period = policy.period

    # -- set-up ---------------------------------------------------------------
    def _steps(self, lo, hi, s: SGDState) -> None:
        p = self.prob
        steps.sgd_steps(
            p.indptr,
            p.indices,
            p.data,
            p.codes,
            p.sw,
            self.order,
            lo,
            hi,
            self.cfg.schedule_id,
            self.hp,
            s.V,
            s.scale,
            s.b,
            s.U,
            s.csum,
            s.bsum,
            p.pos_code,
            p.pos_w,
            p.neg_w,
            s.st,
        )

    def _warm_up(self) -> None:
        """Load (or compile) every kernel now, so no timing below includes numba."""
        self.order = np.arange(self.prob.n_local, dtype=np.int64)
        self._steps(0, 0, self.state)
        s, p, buf = self.state, self.prob, self.buf
        steps.pack_model(s.V, s.scale, s.b, 0.0, buf)
        steps.unpack_model(buf, s.V, s.scale, s.b, s.U, s.csum)  # zero weight: no change
        steps.pack_average(s.V, s.U, s.csum, s.bsum, 0.0, buf)
        steps.unpack_weights(buf, self.W, self.w0)
        steps.hinge_sums(
            p.indptr[:1],
            p.indices,
            p.data,
            p.codes,
            p.sw,
            self.W,
            self.w0,
            p.pos_code,
            p.pos_w,
            p.neg_w,
            self.losses,
        )
        if p.val is not None:
            steps.count_correct(p.val[0][:1], *p.val[1:], self.W, self.w0, p.pos_code)

    def _start_policy(self) -> int:
        """Measure one local step and one model Allreduce when the policy needs them."""
        step_s = sync_s = None
        if self.comm.size > 1 and self.policy.measures:
            probe = np.zeros_like(self.buf)
            # First call: sets up the channel and lines the ranks up after loading (not timed).
            self.comm.sum_inplace(probe)
            with self.stats.timer("calibrate"):
                s = self.state
                scratch = SGDState(
                    s.V.copy(),
                    s.scale.copy(),
                    s.b.copy(),
                    s.U.copy(),
                    s.csum.copy(),
                    s.bsum.copy(),
                    s.st.copy(),
                    s.rng,
                )
                n = min(PROBE_STEPS, self.prob.n_local)
                step_local = np.inf
                for _ in range(3):  # best of three: a preempted probe says nothing
                    t0 = time.perf_counter()
                    self._steps(0, n, scratch)
                    step_local = min(step_local, (time.perf_counter() - t0) / max(n, 1))
                times = []
                for _ in range(PROBE_SYNCS):  # a sync as the epochs do it: pack, sum, unpack
                    t0 = time.perf_counter()
                    steps.pack_model(scratch.V, scratch.scale, scratch.b, 1.0, probe)
                    self.comm.sum_inplace(probe)
                    steps.unpack_model(
                        probe, scratch.V, scratch.scale, scratch.b, scratch.U, scratch.csum
                    )
                    times.append(time.perf_counter() - t0)
                agreed = self.comm.max_(np.array([step_local, float(np.median(times))]))
                step_s, sync_s = float(agreed[0]), float(agreed[1])
        period = self.policy.start(self.prob.n_local_max, step_s, sync_s)
        if self.log is not None and step_s is not None:
            self.log(
                f"msf: step {step_s * 1e6:.3g} us, sync {sync_s * 1e6:.3g} us "
                f"-> sync every {period} samples"
            )
        return period

    # -- epochs -----------------------------------------------------------------
    def run(self, n_epochs: int, *, stop_on_tol: bool = True) -> int:
        """Run up to ``n_epochs`` epochs (fewer if the tolerance rule stops); return the count."""
        with self.comm.deferred_interrupts():  # Ctrl-C: every rank stops after one sync
            for e in range(n_epochs):
                self.epoch()
                if stop_on_tol and self.converged:
                    return e + 1
        return n_epochs

    def epoch(self) -> float:
        """One pass over the local rows with model averages; returns the agreed objective."""
        p, s, st, comm = self.prob, self.state, self.stats, self.comm
        t_epoch = time.perf_counter()
        val_before = st.seconds["validation"]
        s.epoch += 1
        self.hp[steps.H_EPOCH] = float(s.epoch)
        if self.cfg.shuffle:
            self.order = block_order(s.rng, p.n_local)
        distributed = comm.size > 1
        K = -(-p.n_local_max // self.period) if distributed else 1
        bounds = (np.arange(K + 1, dtype=np.int64) * p.n_local) // K
        t_comp = t_pack = t_comm = 0.0
        perf = time.perf_counter
        buf, nbytes = self.buf, 0
        avg = bool(self.cfg.average)
        for kk in range(K):
            lo, hi = int(bounds[kk]), int(bounds[kk + 1])
            t0 = perf()
            self._steps(lo, hi, s)
            t1 = perf()
            t_comp += t1 - t0
            if distributed:
                steps.pack_model(s.V, s.scale, s.b, float(hi - lo), buf)
                # the averaged iterates' sums do not change in a sync: send them along
                send = self.buf2 if avg and kk == K - 1 else self.buf2[: buf.size + 1]
                if avg and kk == K - 1:
                    steps.pack_average(s.V, s.U, s.csum, s.bsum, s.st[steps.S_NAVG], self.avg_buf)
                send[0] = comm.interrupt_vote()
                t2 = perf()
                comm.sum_inplace(send)
                t3 = perf()
                comm.raise_if_interrupted(send[0])
                steps.unpack_model(buf, s.V, s.scale, s.b, s.U, s.csum)
                t_pack += (t2 - t1) + (perf() - t3)
                t_comm += t3 - t2
                nbytes += send.nbytes
        self._avg_ready = distributed and avg
        n_sync = K if distributed else 0
        st.seconds["compute"] += t_comp
        st.seconds["pack"] += t_pack
        st.seconds["comm"] += t_comm
        st.add("n_iter")
        st.add("n_sync", n_sync)
        st.add("n_steps", p.n_local)
        st.add("bytes_sync", nbytes)
        per_step = t_comp / p.n_local if p.n_local else 0.0
        per_sync = (t_pack + t_comm) / n_sync if n_sync else 0.0
        objective, accuracy, step_s, sync_s = self._evaluate(per_step, per_sync)
        self._after_epoch(objective, accuracy, step_s, sync_s, n_sync)
        # wall time of the epoch without validation scoring (monitoring, not training)
        st.seconds["epochs"] += (
            time.perf_counter() - t_epoch - (st.seconds["validation"] - val_before)
        )
        st.traces["train_seconds"].append(st.seconds["epochs"])
        return objective

    def _after_epoch(self, objective, accuracy, step_s, sync_s, n_sync) -> None:
        st = self.stats
        if self.comm.size == 1 or not self.policy.measures:
            step_s = sync_s = None
        before, used = getattr(self.policy, "n_backoff", 0), self.period
        self.period = self.policy.end_epoch(self.state.epoch, objective, accuracy, step_s, sync_s)
        st.add("n_msf_backoff", getattr(self.policy, "n_backoff", 0) - before)
        tr = st.traces
        tr["objective"].append(objective)
        tr["val_accuracy"].append(accuracy)
        tr["period"].append(used)  # the epoch's own (a user's trial found the next one here)
        tr["comm_seconds"].append(st.seconds["comm"])
        tr["n_sync"].append(st.counts["n_sync"])
        self.state.objectives.append(objective)
        # the stopping score, lower is better: the objective, or with early stopping the
        # held-out rows' error rate (scikit-learn's rule on their accuracy)
        score = 1.0 - accuracy if self.cfg.early_stopping and accuracy is not None else objective
        tol = self.cfg.tol
        if tol is not None:
            self._no_improvement = self._no_improvement + 1 if score > self._best - tol else 0
            self.converged = self._no_improvement >= self.cfg.n_iter_no_change
        self._best = min(self._best, score)
        if self.log is not None:
            acc = "" if accuracy is None else f", validation accuracy {100 * accuracy:.2f}%"
            self.log(
                f"epoch {self.state.epoch}: objective {objective:.6g}{acc}, "
                f"{n_sync} syncs, next period {self.period}"
            )

    # -- evaluation ---------------------------------------------------------------
    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        """The evaluated model (W, w0), the same on every rank; collective with averaging."""
        s, k = self.state, self.prob.n_models
        if self.cfg.average:
            if not self._avg_ready:  # not summed by the last sync (one rank, or no epoch yet)
                steps.pack_average(s.V, s.U, s.csum, s.bsum, s.st[steps.S_NAVG], self.avg_buf)
                if self.comm.size > 1:
                    with self.stats.timer("comm_eval"):
                        self.comm.sum_inplace(self.avg_buf)
                self._avg_ready = True
            if self.avg_buf[-1] > 0:
                steps.unpack_weights(self.avg_buf, self.W, self.w0)
                return self.W, self.w0
        np.multiply(s.scale.reshape(k, 1), s.V, out=self.W)
        self.w0[:] = s.b
        return self.W, self.w0

    def _evaluate(self, per_step: float, per_sync: float):
        """Real primal objective on all training rows; validation accuracy if any.

        One Allgather carries each rank's hinge sums, correct count and cost
        measurements, so the MSF policy's agreement costs no extra collective.
        Returns (objective, accuracy or None, agreed step cost, agreed sync cost).
        """
        p, st, k = self.prob, self.stats, self.prob.n_models
        with st.timer("objective"):
            W, w0 = self.weights()
            steps.hinge_sums(
                p.indptr,
                p.indices,
                p.data,
                p.codes,
                p.sw,
                W,
                w0,
                p.pos_code,
                p.pos_w,
                p.neg_w,
                self.losses,
            )
        correct = 0.0
        if p.val is not None:
            with st.timer("validation"):
                correct = steps.count_correct(*p.val, W, w0, p.pos_code)
        ev = self.evals
        ev[:k] = self.losses
        ev[k:] = correct, per_step, per_sync
        if self.comm.size > 1:
            with st.timer("comm_eval"):
                self.comm.allgather_into(ev, self.evals_all)
        else:
            self.evals_all[0] = ev
        sums = self.evals_all[:, : k + 1].sum(axis=0)
        reg = 0.5 * self.cfg.alpha * float(np.einsum("ij,ij->", W, W))
        objective = reg + float(sums[:k].sum()) / max(p.n_samples, 1)
        if not math.isfinite(objective) and not (np.isfinite(W).all() and np.isfinite(w0).all()):
            raise DivergedError(  # (the model and objective are agreed: every rank raises)
                f"SGD diverged in epoch {self.state.epoch}: the weights overflowed (objective "
                f"{objective:g}); raise alpha ({self.cfg.alpha:g}), lower the learning rate or "
                "scale the features"
            )
        accuracy = float(sums[k]) / p.val_weight if p.val_weight > 0 else None
        # the slowest rank's step; the least-waiting rank's sync (its pure cost)
        step_s = float(self.evals_all[:, k + 1].max())
        sync_s = float(self.evals_all[:, k + 2].min())
        return objective, accuracy, step_s, sync_s

"""The GPs of a policy's black-box constraints: one per output, over the objective's data.

A policy that declares constraints ``c_j(x, t) >= 0`` (``make(..., constraints=[...])``)
models each ``c_j`` by its own :class:`~dynbo.models.SpatioTemporalGP`: the same kernel
families, the same inputs (unit-box point and the policy's time coordinate, e.g.
TV-GP-UCB's observation index) and the same per-observation noise multipliers as the
objective's GP, its own hyperparameters and standardization. :class:`ConstraintModels`
holds them and mirrors every change of the objective's dataset (append, remove, keep,
reset), so that what the policy keeps is kept for every output, row for row.

The container is *copy-on-write*: every change returns a new container whose GPs are
shallow copies (the GP replaces its tensors rather than editing them in place), so a
policy's snapshot (a shallow copy of its attributes) holds the old container unchanged
and a failed call restores it for free.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from dynbo.models.gp import SpatioTemporalGP
from dynbo.models.kernel import Hyperparameters, KernelSpec

__all__ = ["ConstraintModels"]


class ConstraintModels:
    """One GP per declared constraint, all over the rows of the objective's dataset.

    Args:
        names: the constraints' names, in the order of the value columns.
        kernel: the objective GP's kernel (families, dimension, time input).
        hyperparameters: the initial values of every constraint GP (standardized units).
        standardize, center, dtype, device: as :class:`~dynbo.models.SpatioTemporalGP`
            (a safe set's GPs are not centred: their prior mean is the threshold 0).

    Attributes:
        names: ``(J,)`` the constraint names.
        gps: ``(J,)`` their GPs (read them; change them only through the methods, which
            return a new container).
        histories: ``(J,)`` what each GP's warm-started fit remembers
            (a :class:`~dynbo.policies.fit_strategy.FitHistory` or ``None``).
    """

    def __init__(
        self,
        names: Sequence[str],
        kernel: KernelSpec,
        hyperparameters: Hyperparameters,
        *,
        standardize: bool = True,
        center: bool = True,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        self.names: tuple[str, ...] = tuple(names)
        self.gps: tuple[SpatioTemporalGP, ...] = tuple(
            SpatioTemporalGP(
                kernel,
                hyperparameters,
                standardize=standardize,
                center=center,
                dtype=dtype,
                device=device,
            )
            for _ in self.names
        )
        self.histories: tuple[Any, ...] = (None,) * len(self.names)

    @classmethod
    def of(
        cls, safety: Any, kernel: KernelSpec, hyperparameters: Hyperparameters, **settings: Any
    ) -> ConstraintModels:
        """The GPs of a policy's constraints (``safety``: its
        :class:`~dynbo.acquisition.constraints.Safety`): in safe mode not centred, so that
        the prior mean is the threshold 0 and not the mean of the values seen elsewhere."""
        return cls(safety.names, kernel, hyperparameters, center=safety.mode != "safe", **settings)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def n(self) -> int:
        """Number of observations each GP holds (0 without constraints)."""
        return self.gps[0].n if self.gps else 0

    @property
    def values(self) -> torch.Tensor:
        """``(n, J)`` the observed constraint values, original units (a copy)."""
        if not self.gps:
            return torch.empty((0, 0), dtype=torch.float64)
        return torch.stack([gp.targets for gp in self.gps], dim=1)

    def gp(self, name: str) -> SpatioTemporalGP:
        """The GP of the constraint ``name``.

        Raises:
            ValueError: ``name`` is not a declared constraint.
        """
        if name not in self.names:
            raise ValueError(
                f"output must be one of the declared constraints {list(self.names)}, got {name!r}"
            )
        return self.gps[self.names.index(name)]

    def hyperparameters(self) -> dict[str, dict[str, Any]]:
        """``name -> hyperparameters`` of each constraint GP (plain values)."""
        return {name: gp.hyperparameters.as_dict() for name, gp in zip(self.names, self.gps)}

    # ------------------------------------------------------------------ copy-on-write
    def _changed(self, change: Callable[[SpatioTemporalGP, int], None]) -> ConstraintModels:
        """A new container whose GP ``j`` is a copy of this one's after ``change(gp, j)``."""
        out = copy.copy(self)
        gps = []
        for j, gp in enumerate(self.gps):
            twin = copy.copy(gp)
            change(twin, j)
            gps.append(twin)
        out.gps = tuple(gps)
        return out

    def added(
        self,
        inputs: torch.Tensor,
        values: torch.Tensor,
        noise_scale: torch.Tensor | float | None = None,
    ) -> ConstraintModels:
        """The container after appending rows (O(n^2) each per GP).

        Args:
            inputs: ``(k, input_dim)`` the GP inputs of the new rows (the objective's).
            values: ``(k, J)`` their constraint values, original units.
            noise_scale: ``k`` noise multipliers (default 1), as the objective's.
        """
        if not self.names:
            return self
        values = torch.as_tensor(values).reshape(-1, len(self))
        return self._changed(lambda gp, j: gp.add(inputs, values[:, j], noise_scale=noise_scale))

    def removed(self, indices: Sequence[int]) -> ConstraintModels:
        """The container after removing rows one after another (each index 0-based in the
        dataset left by the removals before it, as
        :meth:`~dynbo.models.SpatioTemporalGP.remove_sequence`)."""
        indices = [int(i) for i in indices]
        if not indices or not self.names:
            return self
        return self._changed(lambda gp, j: gp.remove_sequence(indices))

    def kept(self, keep: torch.Tensor, *, keep_scale: bool = False) -> ConstraintModels:
        """The container with only the rows where the boolean ``(n,)`` ``keep`` is true
        (each GP refactorized; the kept rows' inputs and noise multipliers unchanged)."""
        if not self.names:
            return self

        def keep_rows(gp: SpatioTemporalGP, j: int) -> None:
            mask = keep.to(gp.inputs.device)
            gp.set_data(
                gp.inputs[mask], gp.targets[mask], gp.noise_scale[mask], keep_scale=keep_scale
            )

        return self._changed(keep_rows)

    def with_noise_scale(self, noise_scale: torch.Tensor) -> ConstraintModels:
        """The container with the objective's ``(n,)`` noise multipliers (W-GP-UCB's
        weights, SparQ's ageing): free where they did not change."""
        if all(torch.equal(gp.noise_scale, noise_scale.to(gp.dtype)) for gp in self.gps):
            return self
        return self._changed(lambda gp, j: gp.set_noise_scale(noise_scale))

    def restandardized(self, *, keep_scale: bool = False) -> ConstraintModels:
        """The container with each GP's standardization recomputed from its data."""
        if self.n == 0:
            return self
        return self._changed(lambda gp, j: gp.restandardize(keep_scale=keep_scale))

    def fitted(
        self, fit: Callable[[SpatioTemporalGP, Any], Any]
    ) -> tuple[ConstraintModels, list[Any]]:
        """The container after ``fit(gp, history) -> (result, new_history)`` on each GP.

        Returns:
            the new container and the ``J`` fit results.
        """
        results: list[Any] = []
        histories = list(self.histories)

        def refit(gp: SpatioTemporalGP, j: int) -> None:
            result, histories[j] = fit(gp, self.histories[j])
            results.append(result)

        out = self._changed(refit)
        out.histories = tuple(histories)
        return out, results

    # ------------------------------------------------------------------ inference
    def predict(self, inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Posterior mean and standard deviation of every constraint, original units.

        Args:
            inputs: ``(m, input_dim)`` GP inputs (differentiable: autograd flows to them).

        Returns:
            ``(mean, sd)``, each ``(m, J)``.
        """
        means, sds = [], []
        for gp in self.gps:
            mean, variance = gp.predict(inputs)
            means.append(mean)
            sds.append(variance.sqrt())
        return torch.stack(means, dim=-1), torch.stack(sds, dim=-1)

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, Any]:
        """``{"names", "gps", "histories"}``: each GP's exact state and fit history."""
        return {
            "names": list(self.names),
            "gps": [gp.state_dict() for gp in self.gps],
            "histories": [None if h is None else h.state() for h in self.histories],
        }

    def loaded(
        self, state: Mapping[str, Any], history_from_state: Callable[[Any], Any]
    ) -> ConstraintModels:
        """A container restored from :meth:`state_dict` (bit-exact, no refactorization).

        Args:
            state: what :meth:`state_dict` returned for a container of the same names.
            history_from_state: rebuilds a fit history from its saved form.

        Raises:
            ValueError: other names, or a GP state that does not load.
        """
        if list(state.get("names", ())) != list(self.names):
            raise ValueError(
                f"constraint state is for {list(state.get('names', ()))}, not {list(self.names)}"
            )
        gps, histories = list(state["gps"]), list(state["histories"])
        if len(gps) != len(self) or len(histories) != len(self):
            raise ValueError("constraint state must hold one GP and one history per name")

        def load(gp: SpatioTemporalGP, j: int) -> None:
            gp.load_state_dict(gps[j])

        out = self._changed(load)
        out.histories = tuple(history_from_state(h) for h in histories)
        sizes = {gp.n for gp in out.gps}
        if len(sizes) > 1:
            raise ValueError(f"constraint GPs hold different numbers of observations: {sizes}")
        return out

"""Lumped-RC thermal model of a phone: NPU die, CPU, board, two back-cover hotspots, battery.

Nodes exchange heat through conductances (W/K) and lose it to ambient through the board (front
glass and frame) and the back cover. Each step is integrated exactly for a constant heat input
(T -> T_ss + exp(A dt)(T - T_ss)), so any step length is stable and accurate. Capacities and
conductances are tuned so that sustained decode (~3.9 W) settles near 40-41 °C on the hottest
cover point at 25 °C ambient, the die reacts in seconds and the cover in minutes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NODES = ("npu", "cpu", "board", "cover_a", "cover_b", "battery")
_INDEX = {name: i for i, name in enumerate(NODES)}

# Heat capacity per node, J/K.
CAPACITY_J_PER_K = {"npu": 0.35, "cpu": 0.45, "board": 22.0, "cover_a": 9.0, "cover_b": 11.0, "battery": 48.0}

# Conductances between nodes, W/K (die -> package -> board -> cover / battery).
LINKS_W_PER_K = (
    ("npu", "cpu", 0.16),
    ("npu", "board", 0.10),  # through the shield: DIE_TO_SHIELD and SHIELD_TO_BOARD in series
    ("cpu", "board", 0.30),
    ("board", "cover_a", 0.55),
    ("board", "battery", 0.30),
    ("battery", "cover_b", 0.45),
    ("cover_a", "cover_b", 0.30),  # the graphite heat spreader under the back cover
)

# The die-to-board link's two halves, W/K (series: 1 / (1/1.0 + 1/0.1111) = 0.10).
DIE_TO_SHIELD_W_PER_K = 1.0
SHIELD_TO_BOARD_W_PER_K = 1.0 / (1.0 / 0.10 - 1.0 / DIE_TO_SHIELD_W_PER_K)

# Conductances to ambient, W/K (convection + radiation from each surface).
TO_AMBIENT_W_PER_K = {"board": 0.078, "cover_a": 0.095, "cover_b": 0.078}

# Where each activity's power turns into heat (fractions of the phone's power; sum 1).
HEAT_SPLIT = {
    "idle": {"cpu": 0.25, "board": 0.75},
    "audio": {"cpu": 0.30, "board": 0.70},
    "prefill": {"npu": 0.72, "cpu": 0.12, "board": 0.16},
    "decode": {"npu": 0.70, "cpu": 0.12, "board": 0.18},
    "speak": {"npu": 0.58, "cpu": 0.14, "board": 0.28},
    "cpu_decode": {"npu": 0.05, "cpu": 0.75, "board": 0.20},
    "npu_awake": {"npu": 0.60, "cpu": 0.10, "board": 0.30},
}


@dataclass(frozen=True)
class Cooling:
    """How well the phone sheds and spreads heat.

    `cover_scale` / `board_scale` scale the loss to air (a thick case, a poor cover material);
    `link_scales` scale internal conductances, e.g. a delaminated spreader:
    ``(("cover_a", "cover_b", 0.0), ("board", "cover_a", 1.45))``.
    """

    cover_scale: float = 1.0
    board_scale: float = 1.0
    link_scales: tuple[tuple[str, str, float], ...] = ()


class ThermalModel:
    """Node temperatures in °C; `step(q, dt)` integrates dt seconds with heat input q (W per node)."""

    def __init__(self, ambient_c: float = 25.0, cooling: Cooling = Cooling()) -> None:
        self.ambient_c = ambient_c
        n = len(NODES)
        g = np.zeros((n, n))
        scales = {(a, b): factor for a, b, factor in cooling.link_scales}
        unknown = set(scales) - {(a, b) for a, b, _ in LINKS_W_PER_K}
        if unknown:
            raise ValueError(f"no thermal links {sorted(unknown)}; links: {[(a, b) for a, b, _ in LINKS_W_PER_K]}")
        for a, b, conductance in LINKS_W_PER_K:
            conductance *= scales.get((a, b), 1.0)
            i, j = _INDEX[a], _INDEX[b]
            g[i, j] -= conductance
            g[j, i] -= conductance
            g[i, i] += conductance
            g[j, j] += conductance
        scale = {"cover_a": cooling.cover_scale, "cover_b": cooling.cover_scale, "board": cooling.board_scale}
        for node, conductance in TO_AMBIENT_W_PER_K.items():
            g[_INDEX[node], _INDEX[node]] += conductance * scale[node]
        capacity = np.array([CAPACITY_J_PER_K[name] for name in NODES])
        # Steady state: G (T - T_amb) = q.
        self._resistance = np.linalg.inv(g)
        # dT/dt = -C^-1 G (T - T_ss); symmetrise with C^1/2 so eigh gives real rates.
        root = np.sqrt(capacity)
        rates, vectors = np.linalg.eigh(g / np.outer(root, root))
        self._rates = rates
        self._left = vectors / root[:, None]
        self._right = vectors.T * root[None, :]
        self._splits = {phase: self._vector(split) for phase, split in HEAT_SPLIT.items()}
        self._units = {node: self._vector({node: 1.0}) for node in NODES}
        self.time_constants_s = tuple(sorted(1.0 / rates))
        self._propagators: dict[float, np.ndarray] = {}
        self.t = self.steady_state(np.zeros(n))

    @staticmethod
    def _vector(watts_by_node: dict[str, float]) -> np.ndarray:
        q = np.zeros(len(NODES))
        for node, watts in watts_by_node.items():
            q[_INDEX[node]] = watts
        return q

    def heat(self, phase: str, power_w: float) -> np.ndarray:
        """Heat input per node (W) when the phone draws power_w doing `phase`."""
        split = self._splits.get(phase)
        if split is None:
            raise ValueError(f"no heat split for phase {phase!r}; known: {sorted(HEAT_SPLIT)}")
        return split * power_w

    def heat_at(self, node: str, watts: float) -> np.ndarray:
        return self._units[node] * watts

    def steady_state(self, q: np.ndarray) -> np.ndarray:
        return self.ambient_c + self._resistance @ q

    def step(self, q: np.ndarray, dt: float) -> None:
        ss = self.steady_state(q)
        # exp(A dt) from the modal form, built once per step length (the clock's steps repeat).
        propagator = self._propagators.get(dt)
        if propagator is None:
            if len(self._propagators) > 64:
                self._propagators.clear()
            propagator = self._propagators[dt] = self._left @ (np.exp(-self._rates * dt)[:, None] * self._right)
        self.t = ss + propagator @ (self.t - ss)

    def settle(self, q: np.ndarray) -> None:
        """Jump to the steady state for heat q (a phone that has sat in this state for an hour)."""
        self.t = self.steady_state(q)

    def temperatures(self) -> dict[str, float]:
        """Every node, and the shield (massless: the conductance-weighted mean of die and board)."""
        nodes = {name: float(self.t[i]) for i, name in enumerate(NODES)}
        nodes["shield"] = (DIE_TO_SHIELD_W_PER_K * nodes["npu"] + SHIELD_TO_BOARD_W_PER_K * nodes["board"]) \
            / (DIE_TO_SHIELD_W_PER_K + SHIELD_TO_BOARD_W_PER_K)
        return nodes

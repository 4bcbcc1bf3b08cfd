"""An A/B of two builds on the same units: ABBA blocks on every unit at once, a look after each.

Each unit runs its schedule (bench/ab/schedule.py) block by block, all units of a round at once
(each phone is its own bay). After a block every open gate of every model is looked at
(bench/ab/sequential.py); a settled gate is final and its statistic is no longer measured, and a
model whose gates are all settled stops its units. The A/B ends when every gate is settled or the
plan's last look is reached. A unit that fails (phone lost, instrument error) stops there, named,
and the others go on; a build that cannot be installed stops the A/B, keeping what was measured
(`BuildUnusable.partial`).
"""
from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor

from phonebench.core.errors import BenchError, UsageError
from .dialogs import with_dialog_statistics
from .protocol import AbBench, BuildUnusable
from .records import AbResult, GateResult, Segment, Unit
from .schedule import Side, block_log_ratio, block_slots, first_side
from .sequential import CONTINUE, AbPlan, Decision, decide
from .gates import GATES

log = logging.getLogger(__name__)

FIRST_LOOK, LAST_LOOK = 3, 10  # blocks per unit (benchmarks/bench_bisect.py: why these)
Look = Callable[[AbResult, int], None]


def plan_for(metrics: Sequence[str], models: Collection[str], *, threshold: float = 0.03, alpha: float = 0.05,
             beta: float = 0.05, last: int = LAST_LOOK) -> AbPlan:
    """The default plan of an A/B deciding `metrics` on `models`: alpha shared by all of them."""
    return AbPlan.spaced(min(FIRST_LOOK, last), last, threshold=threshold, alpha=alpha, beta=beta,
                         family=max(1, len(metrics) * len(models)))


def run_ab(bench: AbBench, a: str, b: str, *, metrics: Sequence[str], plan: AbPlan,
           models: Collection[str] | None = None, attempt: int = 1, seed: int | None = None,
           on_look: Look | None = None) -> AbResult:
    """Build `a` against build `b` on the bench's units (those of `models`, when given)."""
    units = [u for u in bench.units() if models is None or u.model in models]
    if not units:
        raise UsageError(f"no unit of {', '.join(sorted(models or ())) or 'any model'} on this station")
    result = AbResult(a, b, plan, tuple(metrics), tuple(units), attempt, seed)
    blocks: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(dict)
    decided: dict[tuple[str, str], Decision] = {}
    last: dict[tuple[str, str], Decision] = {}
    first = _counterbalanced(units)
    running: dict[str, Side | None] = {u.name: None for u in units}
    start = {u.name: bench.now(u.name) for u in units}
    result.lab_s = {u.name: 0.0 for u in units}
    active = list(units)
    with ThreadPoolExecutor(max_workers=len(units)) as pool:
        for block in range(1, plan.max_blocks + 1):
            open_metrics = {m: [g for g in metrics if (m, g) not in decided] for m in result.models}
            work = [u for u in active if open_metrics[u.model]]
            if not work:
                break
            futures = {u.name: pool.submit(_block, bench, u, block, first[u.name], running[u.name], a, b,
                                           open_metrics[u.model], result.reference_s.get(u.name)) for u in work}
            unusable: BuildUnusable | None = None
            for unit in work:
                try:
                    segments, reference = futures[unit.name].result()
                except BuildUnusable as exc:
                    unusable = unusable or exc
                    result.stopped[unit.name] = str(exc)
                    active.remove(unit)
                    continue
                except BenchError as exc:  # this unit is lost; the others go on
                    log.warning("A/B %s vs %s: %s stopped at block %d: %s", a, b, unit.name, block, exc)
                    result.stopped[unit.name] = f"block {block}: {exc}"
                    active.remove(unit)
                    continue
                result.segments += segments
                if reference is not None:
                    result.reference_s[unit.name] = reference
                running[unit.name] = segments[-1].side
                for metric in open_metrics[unit.model]:
                    av = [x.values[metric] for x in segments if x.side == "A"]
                    bv = [x.values[metric] for x in segments if x.side == "B"]
                    blocks[(unit.model, metric)].setdefault(unit.name, []).append(
                        block_log_ratio((av[0], av[1]), (bv[0], bv[1])))
            for unit in work:  # a unit that has stopped is free: idle time is not its lab time
                result.lab_s[unit.name] = bench.now(unit.name) - start[unit.name]
            if unusable is not None:
                result.gates = _gates(result, decided, last, blocks)
                unusable.partial = result
                raise unusable
            for model, names in open_metrics.items():
                for metric in names:
                    decision = decide(blocks[(model, metric)], plan, block)
                    last[(model, metric)] = decision
                    if decision.call != CONTINUE:
                        decided[(model, metric)] = decision
            result.gates = _gates(result, decided, last, blocks)
            if on_look is not None:
                on_look(result, block)
    return result


def _counterbalanced(units: Sequence[Unit]) -> dict[str, Side]:
    """ABBA or BAAB by the unit's place among its model's units."""
    seen: dict[str, int] = defaultdict(int)
    first = {}
    for unit in units:
        first[unit.name] = first_side(seen[unit.model])
        seen[unit.model] += 1
    return first


def _block(bench: AbBench, unit: Unit, block: int, first: Side, running: Side | None, a: str, b: str,
           metrics: Sequence[str], reference_s: float | None) -> tuple[list[Segment], float | None]:
    """One ABBA (or BAAB) block on one unit: install when the build changes, then the segment; the
    dialog gates at the unit's reference dialog length (`reference_s`, fixed by its first dialogs)."""
    segments = []
    for slot in block_slots(block, first, running):
        build = a if slot.side == "A" else b
        t0 = bench.now(unit.name)
        installed = bench.install(unit.name, build) if slot.install else None
        measured, reference_s = with_dialog_statistics(bench.segment(unit.name, metrics), metrics, reference_s)
        bad = {m: v for m, v in measured.values.items() if not v > 0}
        if bad:
            raise BenchError(f"{unit.name}: build {build} measured no positive {', '.join(bad)} "
                             f"({bad}): the segment cannot be compared")
        segments.append(Segment(unit.name, block, slot.position, slot.side, build, dict(measured.values),
                                dict(measured.samples), t0, bench.now(unit.name), installed, measured.findings,
                                dict(measured.raw)))
    return segments, reference_s


def _gates(result: AbResult, decided: dict[tuple[str, str], Decision], last: dict[tuple[str, str], Decision],
           blocks: dict[tuple[str, str], dict[str, list[float]]]) -> list[GateResult]:
    out = []
    for model in result.models:
        for metric in result.metrics:
            decision = decided.get((model, metric)) or last.get((model, metric))
            if decision is None:
                continue
            est = decision.estimate
            out.append(GateResult(
                metric, GATES[metric].unit, model, decision.call,
                est.relative if est else None, est.interval(0.95) if est else None, decision.bounds, decision.level,
                est.blocks if est else 0, tuple(blocks[(model, metric)]), decision.look, decision.detail))
    return out


def ab_oracle(bench: AbBench, *, threshold: float = 0.03, last: int = LAST_LOOK, seed: int | None = None,
              on_look: Look | None = None) -> Callable[..., AbResult]:
    """bench/ab/bisect.Oracle over a bench: each step an A/B with the default plan for its gates and
    models, a repeated step (`attempt` 2, 3, ...) with that many times the blocks."""
    def oracle(a: str, b: str, *, models: Sequence[str], metrics: Sequence[str], attempt: int) -> AbResult:
        plan = plan_for(metrics, models, threshold=threshold, last=last * attempt)
        return run_ab(bench, a, b, metrics=metrics, plan=plan, models=models, attempt=attempt, seed=seed,
                      on_look=on_look)
    return oracle

"""Token timing checks (claims 3, 4, 5): first token, per-token jitter, latency under GPU load.

Latencies are what the host sees: the runtime's output is streamed over ADB and every line is
stamped with the station clock as it arrives (phonebench.drivers.clock; the host's monotonic clock on
hardware, the world's clock on an emulated station). The runtime's own event timestamps are a
report, checked against those arrivals (docs/evidence.md):

- the same interval measured both ways (start line to first token, token to token, start line to
  done line) must agree within the link's tolerance: its one-way latency (half the mean round
  trip of a trivial command) plus three standard deviations of that round trip plus two ticks of
  the station clock;
- when at least AGREE_FRACTION of the intervals agree the verdict rests on the host's numbers
  (evidence "measured") and records the report as agreeing; otherwise it FAILs with both values.
  Without a station clock or a streaming transport only the report exists: evidence
  "self-reported", which a profile requiring measurement turns into INCONCLUSIVE.
- the station clock must run in the phone's time domain: with the link, the bench times a pause
  on the phone's own clock (`sleep`, not the runtime) on the station clock. A rate outside
  CLOCK_RATE_RANGE (a clock of another emulated world, the host's clock against a simulated
  world) is a station error naming the clock: the verdict is INVALID, never the phone's FAIL.

Tokens are checked, not only timed: every streamed token id is compared with the bench's own
reference output for its prompt and seed (phonebench.bench.specs.reference_model), and a token that is not the
model's fails the verdict (wrong numerics, or fabricated output). Every inference of claims 3-5 has its
own prompt and seed, drawn from the operating system's entropy as it is issued and recorded with the
raw data: a stream replayed from an earlier run is wrong, and no answer repeats within a check, so a
phone that caches answers and replays them faster or more evenly has nothing to replay (issue 35). A model the bench has no reference for leaves the tokens unchecked: such a
verdict is INCONCLUSIVE at best.

- First token: request sent to the first token line arrived, one sample per inference whose first
  token is the model's (a wrong first token is no first token; it fails the verdict).
- Per-token latency: the gaps between consecutive token arrivals. The runs (inferences) are handed
  to the SLA entry as a list: with independence "block" they are one consecutive series whose
  autocorrelation sets the effective sample size, with "run" each inference is a unit. Link
  jitter only widens the host's gaps, so a pass on arrivals is a pass on the phone.
- Contention: a GPU load runs on the phone while inferences are issued on an open-loop schedule
  (one every `period`, on the station clock). Latencies are measured from the intended start: a
  run that starts late has that lateness charged to its first token gap, and a gap longer than the
  expected token interval also counts the tokens that were due during it (HdrHistogram's
  expected-interval correction). The GPU's busy fraction is the kernel's (the GPU driver's busy
  counters, read by the bench), not the load tool's; the tool's own figure must agree with it
  within GPU_AGREE. Both are the phone's word, so the load must also show itself on the bench's
  side: its draw on the power analyzer (idle with the load minus idle without, >= LOAD_MIN_W) or
  its effect on the tokens (median gap >= 1 + LOAD_MIN_SLOWDOWN x the unloaded baseline's, taken
  in the same session). A load with neither makes the verdict INVALID, whatever the counters say.
"""
from __future__ import annotations

import logging
import math
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from . import CheckResult, Tick, VerdictData, no_tick
from .power import battery_emulation
from ..phone.link import LinkTiming, measure_link
from phonebench.core.errors import InvalidMeasurement
from phonebench.core import judge
from phonebench.core.verdict import Evidence, Finding, FindingKind, Outcome, PlotHint, Verdict
from ..specs.reference_model import PromptCase, ReferenceModel, fresh_cases, reference_for
from ..stats.sequential import SequentialPlan
from ..stats.verdicts import percentile_verdict
from ..specs.sla import SlaEntry
from phonebench.drivers.device import Device
from phonebench.drivers.gpuload import GpuLoad, read_gpu_busy
from .gpu_power import GpuPowerRelation, drawn_power, gpu_level_reading
from phonebench.drivers.power import PowerAnalyzer
from phonebench.drivers.runtime import Arrivals, Generation, RuntimeClient

if TYPE_CHECKING:  # annotations only: typing.Unpack is Python 3.11's
    from typing_extensions import Unpack

log = logging.getLogger(__name__)

PROMPT_SEEDS = (11, 12, 13, 14)  # fixed workloads of checks that compare a unit with itself, not the model
PROMPT_TOKENS = 16
STD_TOKENS = 16           # tokens per inference in the jitter series
TOKEN_MEDIAN = "token_latency_p50"  # the jitter series' median: a nightly gate, no claim limit
CONTENTION_TOKENS = 48
CONTENTION_BASELINE_RUNS = 3
LOAD_SETTLE_S = 2.0
SCHEDULE_SLACK = 1.5      # open-loop period = this x the unloaded run's duration
AGREE_FRACTION = 0.99     # share of intervals the report must match (host scheduling hiccups aside)
GPU_AGREE = 0.10          # the load tool's busy fraction vs the kernel's: windows differ, loads wobble
LOAD_MIN_W = 0.25         # a GPU busy > 70 % draws watts; less than this on the supply is no load
LOAD_MIN_SLOWDOWN = 0.05  # or it slows the tokens by at least this (median gap, loaded over unloaded)
POWER_REST_S = 0.5        # rest before reading the phone's draw (no inference tail)
POWER_READS = 5


def token_reference(runtime: RuntimeClient) -> ReferenceModel | None:
    """The bench's implementation of the model the runtime names, or None (tokens cannot be checked)."""
    identity = runtime.identity()
    return reference_for(identity.model, identity.model_sha256)


@dataclass
class TokenRuns:
    """Consecutive inferences: the phone's timestamps and, when observed, the host's arrivals; the
    prompt case of each and the bench's reference to check its tokens against."""

    generations: list[Generation] = field(default_factory=list)
    cases: list[PromptCase] = field(default_factory=list)    # of each generation
    reference: ReferenceModel | None = None
    max_tokens: list[int] = field(default_factory=list)      # asked of each generation
    drawn: list[PromptCase] = field(default_factory=list)    # the series' cases: one per inference, or cycled
    cycled: bool = False  # a few cases over and over (the soak's long dialogs), else one fresh case each
    prompt_tokens: int = PROMPT_TOKENS
    entropy: int = field(default_factory=lambda: secrets.randbits(128))  # recorded: the series can be redrawn
    _rng: np.random.Generator | None = field(default=None, repr=False)

    def case(self, k: int) -> PromptCase:
        """The k-th inference's prompt case: drawn fresh when it is first asked for (or cycled)."""
        if self.cycled:
            return self.drawn[k % len(self.drawn)]
        if self._rng is None:
            self._rng = np.random.default_rng(self.entropy)
        while len(self.drawn) <= k:
            self.drawn += fresh_cases(1, self.prompt_tokens, rng=self._rng)
        return self.drawn[k]

    def add(self, gen: Generation, case: PromptCase, max_tokens: int) -> None:
        self.generations.append(gen)
        self.cases.append(case)
        self.max_tokens.append(max_tokens)

    @property
    def arrivals(self) -> list[Arrivals] | None:
        """Each inference's arrivals on the station clock, or None unless every one was observed."""
        seen = [g.arrivals for g in self.generations if g.arrivals is not None]
        return seen if self.generations and len(seen) == len(self.generations) else None

    @property
    def observed(self) -> bool:
        return self.arrivals is not None

    def first_wrong(self, i: int) -> int | None:
        """Index of the first token of inference i that is not the model's (a missing token counts),
        None when every token is right or there is no reference."""
        if self.reference is None:
            return None
        gen, case = self.generations[i], self.cases[i]
        expected = self.reference.tokens(case.prompt, self.max_tokens[i], case.seed)
        for index, (got, want) in enumerate(zip(gen.tokens, expected)):
            if got != want:
                return index
        short = len(gen.tokens) < len(expected) and gen.completed
        return len(gen.tokens) if short or len(gen.tokens) > len(expected) else None

    @property
    def fabricated(self) -> list[tuple[int, int]]:
        """(inference, token index) of each inference's first token that is not the model's."""
        wrong = ((i, self.first_wrong(i)) for i in range(len(self.generations)))
        return [(i, w) for i, w in wrong if w is not None]

    @property
    def first_token_ms(self) -> np.ndarray:
        """The judged first tokens: request to the first correct token's arrival when observed, else
        the report."""
        arrivals = self.arrivals
        if arrivals is not None:
            wrong_first = {i for i, index in self.fabricated if index == 0}
            return np.array([1000.0 * first for i, a in enumerate(arrivals)
                             if (first := a.first_token_s) is not None and i not in wrong_first])
        return self.reported_first_token_ms

    def prompts(self) -> list[dict[str, object]]:
        """The drawn cases, as recorded with the raw data."""
        return [case.as_dict() for case in self.drawn]

    @property
    def reported_first_token_ms(self) -> np.ndarray:
        return np.array([1000.0 * first for g in self.generations if (first := g.first_token_s) is not None])

    @property
    def gaps_ms(self) -> list[np.ndarray]:
        arrivals = self.arrivals
        if arrivals is not None:
            return [1000.0 * np.diff(np.asarray(a.token_times)) for a in arrivals if len(a.token_times) > 1]
        return self.reported_gaps_ms

    @property
    def reported_gaps_ms(self) -> list[np.ndarray]:
        return [1000.0 * np.diff(np.asarray(g.token_times)) for g in self.generations if len(g.token_times) > 1]

    def intervals(self, *, first: bool = True, gaps: bool = True, span: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(host, phone) seconds of the same intervals: start line to first token, token to token,
        start line to done line."""
        host: list[float] = []
        phone: list[float] = []
        for g in self.generations:
            a = g.arrivals
            if a is None or a.start_t is None or len(a.token_times) != len(g.token_times):
                continue
            if first and g.token_times:
                host.append(a.token_times[0] - a.start_t)
                phone.append(g.token_times[0] - g.start_time)
            if gaps:
                host.extend(np.diff(a.token_times))
                phone.extend(np.diff(g.token_times))
            if span and a.done_t is not None and g.completed:
                host.append(a.done_t - a.start_t)
                phone.append(g.done_time - g.start_time)
        return np.asarray(host), np.asarray(phone)


@dataclass(frozen=True)
class Agreement:
    """How the runtime's report compares with the host's arrivals over the same intervals."""

    intervals: int
    disagreeing: int
    tolerance_s: float
    worst_s: float

    @property
    def agrees(self) -> bool:
        return self.intervals > 0 and self.disagreeing <= (1.0 - AGREE_FRACTION) * self.intervals

    def as_dict(self) -> dict[str, float | int | bool]:
        return {"intervals": self.intervals, "disagreeing": self.disagreeing, "agrees": self.agrees,
                "tolerance_ms": 1000.0 * self.tolerance_s, "worst_ms": 1000.0 * self.worst_s}


def compare_report(host: np.ndarray, phone: np.ndarray, link: LinkTiming) -> Agreement:
    diff = np.abs(host - phone)
    return Agreement(int(diff.size), int(np.count_nonzero(diff > link.tolerance_s)), link.tolerance_s,
                     float(diff.max()) if diff.size else 0.0)


class _Conditions(TypedDict, total=False):
    """The measurement's conditions a token check shows (SlaEntry.evaluate's context)."""

    gpu_load: float  # busy fraction during contention_check


def _judge(entry: SlaEntry, runs: TokenRuns, measured: object, reported: object, link: LinkTiming | None,
          agreement: Agreement | None, *, evidence: Evidence | None = None, raw: Sequence[str] = (),
          plot: str | PlotHint | None = None, extra: Mapping[str, Any] | None = None,
          **context: Unpack[_Conditions]) -> Verdict:
    """The entry's verdict on the host's numbers, the report corroborating them, the tokens checked
    against the reference (module docstring). raw, plot and extra are the verdict's own data
    (SlaEntry.evaluate); context the measurement's conditions."""
    own = VerdictData(raw=raw, plot=plot)
    return _check_tokens(_judge_times(entry, runs, measured, reported, link, agreement, own, extra or {},
                                      evidence=evidence, **context), runs)


def _check_tokens(verdict: Verdict, runs: TokenRuns) -> Verdict:
    """Times of tokens that are not the model's prove nothing: such a stream fails the verdict."""
    facts: dict[str, Any] = {"prompt_cases": len(runs.drawn), "prompts_repeat": runs.cycled,
                             "tokens_checked": runs.reference is not None}
    wrong = runs.fabricated
    # Findings for the judge: without the model's tokens checked no PASS, and tokens that are not
    # the model's fail it.
    if runs.reference is None:
        return judge.found(verdict, Finding(FindingKind.UNSETTLED, "no reference for the model the runtime names: "
                                            "its tokens cannot be told from invented ones"), extra=facts)
    if not wrong:
        return verdict.but(extra=facts, detail=f"{verdict.detail}; every token is the model's "
                                               f"({len(runs.generations)} inferences checked)")
    i, index = wrong[0]
    facts["fabricated_inferences"] = len(wrong)
    return judge.found(verdict, Finding(
        FindingKind.NOT_THE_MODELS,
        f"not the model's output (wrong numerics or fabricated): {len(wrong)} of {len(runs.generations)} "
        f"inferences streamed tokens that are not the model's (first: inference {i}, token {index})"), extra=facts)


def _judge_times(entry: SlaEntry, runs: TokenRuns, measured: object, reported: object, link: LinkTiming | None,
                 agreement: Agreement | None, own: VerdictData, extra: Mapping[str, Any], *,
                 evidence: Evidence | None = None, **context: Unpack[_Conditions]) -> Verdict:
    if link is None or not runs.observed or agreement is None:
        return entry.evaluate(reported, evidence=Evidence.REPORTED, **own, extra={**extra, "source": "runtime report"},
                              detail_prefix="the runtime's own timestamps only (no station clock or stream)",
                              **context)
    if link.domain_problem is not None:
        return link.domain_problem.invalidate(entry.evaluate(
            measured, evidence=evidence or Evidence.MEASURED, **own, extra={**extra, "link": link.as_dict()},
            **context))
    said = entry.evaluate(reported)
    facts = {**extra, "source": "host arrivals (station clock)", "link": link.as_dict(),
             "report": agreement.as_dict(), "reported_value": said.value}
    agrees = (f"the runtime's timestamps agree ({agreement.intervals} intervals within "
              f"{1000 * link.tolerance_s:.3g} ms)")
    verdict = entry.evaluate(measured, evidence=evidence or Evidence.MEASURED, uncertainty=link.uncertainty(),
                             **own, extra=facts, detail_suffix=agrees if agreement.agrees else "", **context)
    if agreement.agrees:
        return verdict
    # The corroboration rule: a runtime report that disagrees with what arrived fails the verdict.
    return judge.found(verdict, Finding(
        FindingKind.CONTRADICTED,
        f"the runtime's report disagrees with what arrived: measured {_fmt(verdict.value)} "
        f"{entry.unit}, reported {_fmt(said.value)} {entry.unit}; {agreement.disagreeing} of "
        f"{agreement.intervals} intervals differ by more than {1000 * link.tolerance_s:.3g} ms "
        f"(worst {1000 * agreement.worst_s:.4g} ms)"))


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def draw_runs(runtime: RuntimeClient, *, cycled: int | None = None, prompt_tokens: int = PROMPT_TOKENS) -> TokenRuns:
    """An empty series with the reference for the runtime's model: each inference a fresh prompt
    case, or `cycled` cases drawn now and used over and over."""
    reference = token_reference(runtime)
    if cycled is not None:
        return TokenRuns(reference=reference, drawn=fresh_cases(cycled, prompt_tokens), cycled=True,
                         prompt_tokens=prompt_tokens)
    return TokenRuns(reference=reference, prompt_tokens=prompt_tokens)


def generate_case(runtime: RuntimeClient, runs: TokenRuns, k: int, max_tokens: int, **options: Any) -> Generation:
    """The k-th inference of a series, on its case (drawn fresh, or cycled); kept in the series.
    options: of RuntimeClient.generate (allow_incomplete, timeout_s)."""
    case = runs.case(k)
    gen = runtime.generate(max_tokens, seed=case.seed, prompt=case.prompt, **options)
    runs.add(gen, case, max_tokens)
    return gen


def run_inferences(runtime: RuntimeClient, n: int, max_tokens: int, *, prompt_tokens: int = PROMPT_TOKENS,
                   tick: Tick = no_tick) -> TokenRuns:
    """n consecutive inferences over prompt cases drawn for this series."""
    runs = draw_runs(runtime, prompt_tokens=prompt_tokens)
    for i in range(n):
        generate_case(runtime, runs, i, max_tokens)
        tick(1)
    return runs


def first_token_check(runtime: RuntimeClient, *, first_token: SlaEntry, n: int | None = None,
                      tick: Tick = no_tick) -> CheckResult:
    """Claim 3: request to first streamed token per inference, against the entry."""
    n = max(n or 0, first_token.n_required)
    link = measure_link(runtime)
    runs = run_inferences(runtime, n, max_tokens=2, tick=tick)
    agreement = compare_report(*runs.intervals(gaps=False, span=False), link) if link and runs.observed else None
    verdict = _judge(first_token, runs, runs.first_token_ms, runs.reported_first_token_ms, link, agreement,
                    raw=("first_token", "first_token_prompts"), plot="samples")
    return _with_prompts(CheckResult([verdict], {"first_token": {"samples": runs.first_token_ms,
                                                                "reported": runs.reported_first_token_ms}}),
                        runs, "first_token")


def token_std_check(runtime: RuntimeClient, *, token_std: SlaEntry, inferences: int | None = None,
                    max_tokens: int = STD_TOKENS, tick: Tick = no_tick) -> CheckResult:
    """Claim 4: std of per-token latency over N consecutive inferences (the entry's parameter),
    decided sequentially at the entry's `sequential_looks` (std_plan): the series stops at the
    first look whose bound settles PASS or FAIL at that look's share of the error."""
    n = inferences or int(token_std.parameters.get("consecutive_inferences", 1000))
    plan = std_plan(token_std, n)
    at_look = replace(token_std, confidence=plan.per_look_confidence)
    link = measure_link(runtime)
    runs = draw_runs(runtime)
    for look in plan.looks:
        while len(runs.generations) < look:
            generate_case(runtime, runs, len(runs.generations), max_tokens)
            tick(1)
        agreement = compare_report(*runs.intervals(first=False), link) if link and runs.observed else None
        verdict = _judge(at_look, runs, runs.gaps_ms, runs.reported_gaps_ms, link, agreement,
                        raw=("token_latencies", "token_latencies_prompts"), plot="samples")
        decided = verdict if look == plan.n_max else judge.sequential_look(
            verdict, limit=at_look.limit, comparator=at_look.comparator, unit=at_look.unit,
            bounds=look_bounds(at_look, runs.gaps_ms))
        if decided is not None:
            verdict = decided
            break
    done = len(runs.generations)
    facts: dict[str, Any] = {"inferences": done, "tokens_per_inference": max_tokens}
    detail = verdict.detail
    if len(plan.looks) > 1:  # why it stopped where it did, and what the confidence is over all looks
        detail = (f"{detail}; sequential: {done} of {n} consecutive inferences, looks at {list(plan.looks)}, "
                  f"each at {plan.per_look_confidence:.2%} ({plan.confidence:.0%} over all looks)")
        facts["sequential"] = {"looks": list(plan.looks), "stopped_at": done,
                               "per_look_confidence": plan.per_look_confidence,
                               "overall_confidence": plan.confidence}
    # The sequential plan's record: where the series stopped is known only once a look decided.
    verdict = verdict.but(detail=detail, extra=facts)
    median = _token_median_gate(verdict, runs, confidence=token_std.confidence or 0.95)
    gaps = runs.gaps_ms
    raw = {"samples": np.concatenate(gaps) if gaps else np.empty(0),
           "run": np.concatenate([np.full(g.size, i) for i, g in enumerate(gaps)]) if gaps else np.empty(0),
           "reported": np.concatenate(runs.reported_gaps_ms) if runs.reported_gaps_ms else np.empty(0),
           "first_token_ms": runs.first_token_ms}
    return _with_prompts(CheckResult([verdict, median], {"token_latencies": raw}), runs, "token_latencies")


def _token_median_gate(std: Verdict, runs: TokenRuns, *, confidence: float) -> Verdict:
    """The jitter series' median per-token latency: claim 4 states no limit on it (INFO), but a build
    that slows the NPU moves the whole distribution, and the median of the same inferences has a
    tight bound at no lab time, so `bench compare` gates it night to night (docs/nightly.md). Read
    from what the std was read from (the host's arrivals, or the runtime's timestamps when only they
    exist: then it is reported and never compared), each inference a unit (its tokens move
    together), with the std verdict's findings: a stream that lied or was not the model's is no gate."""
    measured = std.evidence in (Evidence.MEASURED, Evidence.CORROBORATED)
    gaps = runs.gaps_ms if measured else runs.reported_gaps_ms
    median = percentile_verdict(TOKEN_MEDIAN, gaps, p=0.5, limit=None, unit="ms", confidence=confidence,
                                independence="run")
    kept = [f for f in std.findings if f.kind not in (FindingKind.STOP_FAIL, FindingKind.STOP_UNDECIDED)]
    source = "host arrivals (station clock)" if measured else "the runtime's own timestamps"
    bound = "n/a" if median.bound is None else f"{median.bound:.4g} ms"
    return judge.found(median, *kept, claim=std.claim, evidence=std.evidence, raw=std.raw,
                       detail=f"median per-token latency over {len(gaps)} consecutive inferences from the {source}: "
                              f"no limit in claim 4, a regression gate night to night; {confidence:.0%} upper "
                              f"bound {bound}, each inference a unit (worth {median.extra.get('n_eff', 0):.0f} "
                              f"independent samples)")


def look_bounds(entry: SlaEntry, gaps: list[np.ndarray]) -> judge.LookBounds:
    """The bounds a look of the jitter series may need (judge.sequential_look): the entry's std
    with each inference as the unit (phonebench.bench.stats.verdicts' between- plus within-run
    bound), and its bound on the other side of the limit."""
    opposite = ">=" if entry.comparator in ("<=", "<") else "<="
    return judge.LookBounds(per_run=lambda: replace(entry, independence="run").evaluate(gaps).bound,
                            opposite=lambda: replace(entry, comparator=opposite).evaluate(gaps).bound)


def std_plan(entry: SlaEntry, n: int) -> SequentialPlan:
    """Looks at the entry's `sequential_looks` below n, and at n; Bonferroni over the looks keeps
    the chance of any wrong decision within the entry's confidence (phonebench.bench.stats.sequential). Without
    looks (or a series shorter than the first) a single look at n: the fixed design."""
    looks = sorted({int(k) for k in entry.parameters.get("sequential_looks", ()) if 2 <= int(k) < n} | {n})
    return SequentialPlan(tuple(looks), entry.confidence or 0.95)


def _with_prompts(result: CheckResult, runs: TokenRuns, name: str) -> CheckResult:
    """Keep the series' drawn prompts and seeds, and which inferences were not the model's, as the
    raw data `<name>_prompts` its verdicts point at."""
    result.raw[f"{name}_prompts"] = {"cases": runs.prompts(), "entropy": str(runs.entropy), "cycled": runs.cycled,
                                     "fabricated": [list(w) for w in runs.fabricated],
                                     "reference": runs.reference.name if runs.reference is not None else None}
    return result


def expected_interval_correction(gaps_ms: np.ndarray, expected_ms: float) -> np.ndarray:
    """Each gap, plus (for a gap longer than the expected interval) the latencies of the tokens that
    were due during it: g - E, g - 2E, ... while at least E (HdrHistogram recordValueWithExpectedInterval)."""
    out: list[float] = []
    for gap in gaps_ms:
        out.append(float(gap))
        missing = gap - expected_ms
        while expected_ms > 0 and missing >= expected_ms:
            out.append(float(missing))
            missing -= expected_ms
    return np.asarray(out)


@dataclass
class _Schedule:
    """Open-loop starts on one time base: the station clock when observing, else the phone's."""

    runtime: RuntimeClient
    observed: bool

    def now(self) -> float:
        return self.runtime.clock.now() if self.observed else self.runtime.status().t  # type: ignore[union-attr]

    def start(self, gen: Generation) -> float:
        return gen.arrivals.sent_t if self.observed else gen.start_time  # type: ignore[union-attr]

    def token_times(self, gen: Generation) -> list[float]:
        return gen.arrivals.token_times if self.observed else gen.token_times  # type: ignore[union-attr]

    def span(self, gen: Generation) -> float:
        a = gen.arrivals
        if self.observed and a is not None and a.done_t is not None:
            return a.done_t - a.sent_t
        return gen.done_time - gen.start_time


@dataclass(frozen=True)
class LoadEffect:
    """What the bench itself sees of the GPU load: its draw on the supply and its effect on tokens."""

    drawn_w: float | None        # idle draw with the load minus without (None: no power analyzer)
    gap_ratio: float | None      # median loaded token gap over the unloaded baseline's

    @property
    def drew_power(self) -> bool:
        return self.drawn_w is not None and self.drawn_w >= LOAD_MIN_W

    @property
    def slowed_tokens(self) -> bool:
        return self.gap_ratio is not None and self.gap_ratio >= 1.0 + LOAD_MIN_SLOWDOWN

    def as_dict(self) -> dict[str, float | None]:
        return {"drawn_w": self.drawn_w, "gap_ratio": self.gap_ratio}


def _judge_load_effect(verdict: Verdict, effect: LoadEffect) -> Verdict:
    """A load that neither draws power nor changes anything was not there, whatever the counters say:
    the judge makes the verdict INVALID (a lie the counters caught stays FAIL, core/judge.py rule 5)."""
    if effect.drew_power or effect.slowed_tokens:
        seen = (f"the load drew {effect.drawn_w:.2f} W on the supply" if effect.drew_power
                else f"the load slowed tokens {effect.gap_ratio:.2f}x against the unloaded baseline")
        return verdict.but(extra={"load_effect": effect.as_dict()}, detail=f"{seen}; {verdict.detail}")
    drawn = "no power analyzer" if effect.drawn_w is None else f"{effect.drawn_w:.2f} W drawn"
    ratio = "n/a" if effect.gap_ratio is None else f"{effect.gap_ratio:.3f}x"
    return judge.found(verdict, Finding(
        FindingKind.INVALID, f"invalid: the GPU load shows no effect the bench can see ({drawn}, token gaps "
                             f"{ratio} the unloaded baseline): the contention condition was not shown"),
        extra={"load_effect": effect.as_dict()})


def contention_check(device: Device, runtime: RuntimeClient, supply: PowerAnalyzer | None = None, *,
                     loaded_latency: SlaEntry, runs: int | None = None, tokens: int = CONTENTION_TOKENS,
                     target: float = 0.75, kind: str = "video+call", gpu_power: GpuPowerRelation | None = None,
                     tick: Tick = no_tick) -> CheckResult:
    """Claim 5: token latencies from the intended start while a GPU load keeps the GPU busy. The
    load must show itself to the bench: on the power analyzer (`supply`, when it feeds the phone)
    or in slower tokens than an unloaded baseline of the same session; else INVALID. Its level:
    from its draw through `gpu_power` (the SoC model's record, bench/checks/gpu_power.py); without
    both the level is the phone's word (`condition_evidence` reported: never a plain pass)."""
    runs = runs or max(2 * loaded_latency.min_runs, math.ceil(loaded_latency.min_samples / max(tokens - 1, 1)), 10)
    load = GpuLoad(device)
    load.status()  # a phone without the load generator is skipped before any work
    link = measure_link(runtime)
    baseline = run_inferences(runtime, CONTENTION_BASELINE_RUNS, tokens)
    clock = _Schedule(runtime, baseline.observed)
    expected_ms = float(np.median(np.concatenate(baseline.gaps_ms)))
    period = SCHEDULE_SLACK * float(np.median([clock.span(g) for g in baseline.generations]))
    measured = draw_runs(runtime)
    latencies: list[np.ndarray] = []
    reported: list[np.ndarray] = []
    lateness: list[float] = []
    tool_busy: list[float] = []
    kernel_busy: list[float | None] = []

    def sample_busy() -> None:
        tool_busy.append(_busy(load))
        kernel_busy.append(read_gpu_busy(device))

    if supply is not None:
        battery_emulation(supply)  # the analyzer feeds the phone, so its draw is what the meter reads
    idle = drawn_power(supply, device, POWER_REST_S, POWER_READS) if supply is not None else None
    load.start(target, kind)
    try:
        device.run(["sleep", f"{LOAD_SETTLE_S:g}"])
        loaded = drawn_power(supply, device, POWER_REST_S, POWER_READS) if supply is not None else None
        sample_busy()
        t0 = clock.now()
        for k in range(runs):
            intended = t0 + k * period
            wait = intended - clock.now()
            if wait > 0:
                device.run(["sleep", f"{wait:.6f}"], timeout_s=wait + 30.0)
            gen = generate_case(runtime, measured, k, tokens)
            late_ms = max(0.0, 1000.0 * (clock.start(gen) - intended))
            latencies.append(_from_intended(clock.token_times(gen), late_ms, expected_ms))
            reported.append(_from_intended(gen.token_times, late_ms, expected_ms))
            lateness.append(late_ms)
            sample_busy()
            tick(1)
    finally:
        load.stop()
    tool = float(np.mean(tool_busy))
    kernel = [b for b in kernel_busy if b is not None]
    gpu_load = float(np.mean(kernel)) if len(kernel) == len(kernel_busy) else None
    agreement = compare_report(*measured.intervals(first=False, span=False), link) \
        if link and measured.observed else None
    evidence = Evidence.MEASURED if gpu_load is not None else Evidence.REPORTED
    verdict = _judge(loaded_latency, measured, latencies, reported, link, agreement, evidence=evidence,
                    raw=("token_latencies_gpu_load", "token_latencies_gpu_load_prompts"), plot="samples",
                    extra={"gpu_load": gpu_load, "gpu_load_tool": tool, "expected_interval_ms": expected_ms,
                           "schedule_period_s": period,
                           "max_start_lateness_ms": max(lateness) if lateness else None, "load_kind": kind},
                    gpu_load=gpu_load if gpu_load is not None else tool)
    verdict = _judge_gpu_load(verdict, tool, gpu_load)
    loaded_gaps = measured.gaps_ms
    effect = LoadEffect(None if idle is None or loaded is None else loaded[0] - idle[0],
                        float(np.median(np.concatenate(loaded_gaps))) / expected_ms if loaded_gaps else None)
    verdict = _judge_load_effect(verdict, effect)
    if verdict.outcome is not Outcome.INVALID:  # a load that showed no effect at all has no level to judge
        reading_u = math.hypot(idle[1], loaded[1]) if idle is not None and loaded is not None else 0.0
        verdict = gpu_level_reading(gpu_load if gpu_load is not None else tool, effect.drawn_w, reading_u,
                                    gpu_power).on(verdict)
    raw = {"samples": np.concatenate(latencies) if latencies else np.empty(0),
           "run": np.concatenate([np.full(x.size, i) for i, x in enumerate(latencies)]) if latencies else np.empty(0),
           "start_lateness_ms": np.asarray(lateness), "gpu_busy_tool": np.asarray(tool_busy),
           "gpu_busy_kernel": np.asarray([np.nan if b is None else b for b in kernel_busy])}
    return _with_prompts(CheckResult([verdict], {"token_latencies_gpu_load": raw}), measured,
                        "token_latencies_gpu_load")


def _from_intended(times: list[float], late_ms: float, expected_ms: float) -> np.ndarray:
    gaps = 1000.0 * np.diff(np.asarray(times))
    if gaps.size:
        gaps[0] += late_ms
    return expected_interval_correction(gaps, expected_ms)


def _judge_gpu_load(verdict: Verdict, tool: float, kernel: float | None) -> Verdict:
    """The GPU load condition rests on the kernel's counters; the tool must agree with them (a
    corroboration rule on the decided verdict, like the evidence requirement)."""
    if kernel is None:
        return verdict.but(detail=f"GPU load {tool:.0%} is the load tool's word (no GPU busy counters); "
                                  f"{verdict.detail}")
    if abs(tool - kernel) > GPU_AGREE:
        return judge.found(verdict, Finding(
            FindingKind.CONTRADICTED, f"the GPU load tool reports {tool:.0%} busy but the GPU's busy counters read "
                                      f"{kernel:.0%} (more than {GPU_AGREE:.0%} apart): the contention was not there"))
    return verdict.but(detail=f"GPU {kernel:.0%} busy by its counters (tool: {tool:.0%}); {verdict.detail}")


def _busy(load: GpuLoad) -> float:
    state = load.status()
    if not state.running or state.gpu_busy is None:
        raise InvalidMeasurement(f"{load.device.name}: the GPU load is not running ({state})",
                                 hint="the load generator stopped by itself; check `gpuload status` on the phone")
    return float(state.gpu_busy)

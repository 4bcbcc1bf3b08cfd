"""NPU microcode fingerprinting: identity (getprop + runtime) plus a behavioural signature
(accumulator width and overflow rule) measured with probe vectors, matched against the profile
library.

Probe plan, all in ONE runtime call (the batch is pushed as a file):
- width: for every candidate width B (12..32), all-(+64) products at K = 2^(B-7) - 1 and
  2^(B-7) + 1 terms bracket B's overflow threshold; the smallest B whose upper probe is not exact
  is the width (the bisection on K, unrolled into one batch: each bracket is one bisection step's
  answer). Sign-homogeneous, so the hardware's reduction order cannot matter.
- rule: the overflowing probe wraps negative or sticks at 2^(B-1) - 1; a negative-side probe
  (-56 products) checks the low limit; an order-dependent probe (+64 run then -56 run, and its
  reverse) separates saturating at each step from clamping once at the end.
- consistency: random run-length and dense probes, repeated once, predicted by the fitted model.
Every observation is predicted for every candidate model (wide, or B in 12..32 x three rules);
exactly one must fit, else the verdict is "inconsistent" and the raw results are kept.
Verdicts: known, unknown (no profile: a stub is produced), mismatch, inconsistent.

Identity is not what the phone says it is. getprop and the runtime's version string are the
phone's word; independent of it are the station's inventory (the DUT's `expected_soc`: what the
lab put in the bay) and behaviour: the signature above, and a **timing signature** when the client
has a station clock: TIMING_PROBES probes of TIMING_LENGTH MACs against as many one-MAC probes,
both batches timed on the station clock, give the NPU's MAC throughput, which must lie within
TIMING_TOLERANCE of the profile's `npu_gmac_per_s` for the SoC (the bench asks for the default
perf profile while timing). Declared, reported and fingerprinted SoC must agree: a unit where they
do not is a MISMATCH (never trusted with an adapter, never a matrix pass), whatever its overflow
behaviour. A faster die could throttle itself to look like a slower claimed part: the
inventory is the lab's side there.
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

import math
import secrets

from phonebench.core.errors import BenchError
from phonebench.core.phone_text import printable
from .identity import parse_getprop
from .link import measure_link
from ..specs.profiles import OVERFLOW_RULES, ProfileBuild, ProfileLibrary, Signature, load_library, profile_stub
from phonebench.core.verdict import Outcome, Verdict
from phonebench.drivers.device import Device
from phonebench.drivers.runtime import Probe, ProbeResult, RuntimeClient, encode_dense, encode_runs

log = logging.getLogger(__name__)

CANDIDATE_BITS = tuple(range(12, 33))
KNOWN, UNKNOWN, MISMATCH, INCONSISTENT = "known", "unknown", "mismatch", "inconsistent"
# INT4 operand pairs giving the extreme products.
_PLUS_64, _MINUS_56 = (-8, -8), (-8, 7)
_PLAN_SEED = 0x5EED
TIMING_PROBES = 8
TIMING_LENGTH = 1 << 30  # MACs per timing probe: ~0.1 s on a phone NPU, well above the link's jitter
TIMING_TOLERANCE = 0.10  # relative: datasheet throughput vs the clock the unit really runs at
TIMING_PROFILE = "balanced"  # the perf profile the datasheet's throughput is given for


@dataclass(frozen=True)
class PlannedProbe:
    probe: Probe
    products: np.ndarray  # product of each run
    counts: np.ndarray    # length of each run

    @property
    def exact(self) -> int:
        return int((self.products * self.counts).sum())


def _runs_probe(ident: str, runs: list[tuple[tuple[int, int], int]]) -> PlannedProbe:
    """runs: ((a, b), count) -> vectors a and b with the same run boundaries."""
    a = encode_runs((pair[0], n) for pair, n in runs)
    b = encode_runs((pair[1], n) for pair, n in runs)
    products = np.array([pair[0] * pair[1] for pair, _ in runs], dtype=np.int64)
    return PlannedProbe(Probe(ident, a, b), products, np.array([n for _, n in runs], dtype=np.int64))


def probe_plan(seed: int = _PLAN_SEED) -> list[PlannedProbe]:
    plan = []
    for bits in CANDIDATE_BITS:
        threshold = 1 << (bits - 7)  # K at which +64 products reach 2^(B-1)
        n_pos = 5 << (bits - 9)      # 1.25 x 2^(B-1) of +64 products
        n_neg = (1 << (bits - 2)) // 56  # at most 0.5 x 2^(B-1) of -56 products
        plan += [
            _runs_probe(f"w{bits}-below", [(_PLUS_64, threshold - 1)]),
            _runs_probe(f"w{bits}-above", [(_PLUS_64, threshold + 1)]),
            _runs_probe(f"n{bits}-below", [(_MINUS_56, (1 << (bits - 1)) // 56)]),
            _runs_probe(f"n{bits}-above", [(_MINUS_56, -(-((1 << (bits - 1)) + 64) // 56))]),
            _runs_probe(f"o{bits}-fwd", [(_PLUS_64, n_pos), (_MINUS_56, n_neg)]),
            _runs_probe(f"o{bits}-rev", [(_MINUS_56, n_neg), (_PLUS_64, n_pos)]),
        ]
    rng = np.random.default_rng(seed)
    for index in range(6):
        pairs = rng.integers(-8, 8, (24, 2))
        counts = np.exp(rng.uniform(0, np.log(1 << 22), 24)).astype(np.int64) + 1
        plan.append(_runs_probe(f"r{index}", [((int(a), int(b)), int(n)) for (a, b), n in zip(pairs, counts)]))
    for index in range(2):
        a, b = rng.integers(-8, 8, 2048), rng.integers(-8, 8, 2048)
        plan.append(PlannedProbe(Probe(f"d{index}", encode_dense(a), encode_dense(b)),
                                 (a * b).astype(np.int64), np.ones(2048, dtype=np.int64)))
    plan.append(PlannedProbe(Probe("r0-again", plan[-8].probe.a, plan[-8].probe.b),
                             plan[-8].products, plan[-8].counts))
    return plan


def overflow_probes(bits: int) -> list[PlannedProbe]:
    """The plan's probes that overflow a `bits`-bit accumulator (exact only through an adapter)."""
    return [p for p in probe_plan() if p.probe.id in (f"w{bits}-above", f"n{bits}-above", f"o{bits}-fwd")]


def predict(planned: PlannedProbe, signature: Signature) -> int:
    """What a device with `signature` returns for the probe (bench-side reference model)."""
    terms = planned.products * planned.counts
    total = int(terms.sum())
    if signature.bits is None:
        return total
    lo, hi = -(1 << (signature.bits - 1)), (1 << (signature.bits - 1)) - 1
    if signature.overflow == "wrap":
        return ((total - lo) % (1 << signature.bits)) + lo
    if signature.overflow == "clamp-at-end":
        return min(max(total, lo), hi)
    running = np.cumsum(terms)
    if running.min() >= lo and running.max() <= hi:
        return total
    acc = 0
    for term in terms.tolist():  # a monotone run saturates like one clipped step
        acc = min(max(acc + term, lo), hi)
    return acc


def candidate_signatures() -> list[Signature]:
    return [Signature(None, "none")] + [Signature(b, r) for b in CANDIDATE_BITS for r in OVERFLOW_RULES]


def fit(plan: list[PlannedProbe], results: list[ProbeResult]) -> list[Signature]:
    """Every candidate model that predicts all observations."""
    observed = [r.result for r in results]
    return [sig for sig in candidate_signatures()
            if all(predict(p, sig) == obs for p, obs in zip(plan, observed))]


@dataclass
class FingerprintReport:
    device: str
    serial: str
    soc_manufacturer: str
    soc_model: str
    board_platform: str
    runtime_version: str
    model: str
    microcode: str
    verdict: str
    measured: Signature | None
    expected: Signature | None = None
    profile: ProfileBuild | None = None
    adapter: str | None = None  # adapter to apply (known builds only)
    suggested_adapter: str | None = None  # for an engineer reviewing an unknown build
    candidates: list[str] = field(default_factory=list)  # library builds with the measured signature
    detail: str = ""
    stub: str | None = None
    probes: list[dict[str, Any]] = field(default_factory=list)
    runtime_calls: int = 0
    device_calls: int = 0
    profile_key: str = ""
    declared_soc: str | None = None  # the station's inventory for this bay
    gmac_per_s: float | None = None  # the NPU's MAC throughput, timed on the station clock
    timing_note: str = ""  # why there is no timing signature, if there is none
    behaves_like: list[str] = field(default_factory=list)  # SoCs whose signature (and throughput) it shows

    @property
    def trusted(self) -> bool:
        """Only a known build may get an adapter; anything else is flagged, never trusted."""
        return self.verdict == KNOWN

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["measured"] = self.measured.to_dict() if self.measured else None
        data["expected"] = self.expected.to_dict() if self.expected else None
        data["profile"] = self.profile.to_dict() if self.profile else None
        return data

    def summary(self) -> str:
        measured = str(self.measured) if self.measured else "fits no overflow model"
        adapter = self.adapter or ("-" if self.verdict != UNKNOWN else f"(suggest {self.suggested_adapter})")
        soc = f"{self.soc_manufacturer} {self.soc_model}"
        return (f"{self.device:10} {soc:20} {self.microcode!r:38} measured {measured:28} "
                f"{self.verdict.upper():12} adapter {adapter}")


def _suggest_adapter(library: ProfileLibrary, signature: Signature) -> str | None:
    if signature.bits is None or signature.bits >= 32:
        return "none"
    fitting = [a for a in library.adapters.values() if a.protects(signature.bits)]
    return max(fitting, key=lambda a: a.tile).name if fitting else None


def measure_throughput(client: RuntimeClient) -> float | str:
    """The NPU's MAC throughput (GMAC/s) timed on the client's station clock, or why not."""
    if client.clock is None:
        return "no station clock: no timing signature"
    link = measure_link(client)
    if link is None or link.domain_problem is not None:
        return "the station clock is not in the phone's time domain: no timing signature"
    tag = secrets.token_hex(4)  # ids the phone cannot have seen before
    one = encode_runs([(1, 1)])
    long = encode_runs([(1, TIMING_LENGTH)])
    short_batch = [Probe(f"ts-{tag}-{i}", one, one) for i in range(TIMING_PROBES)]
    long_batch = [Probe(f"tl-{tag}-{i}", long, long) for i in range(TIMING_PROBES)]
    restore = None
    if client.identity().supports("config") and client.config_get("npu.perf_profile") != TIMING_PROFILE:
        restore = client.config_get("npu.perf_profile")
        client.config_set("npu.perf_profile", TIMING_PROFILE)
    try:
        t0 = client.clock.now()
        client.probe(short_batch)
        t1 = client.clock.now()
        client.probe(long_batch)
        t2 = client.clock.now()
    finally:
        if restore is not None:
            client.config_set("npu.perf_profile", restore)
    extra = (t2 - t1) - (t1 - t0)
    # Two calls' jitter against the extra time: below the tolerance by far, or no signature.
    if extra <= 0 or 2.0 * math.sqrt(2.0) * link.jitter_s > TIMING_TOLERANCE / 4.0 * extra:
        return f"the long probes took {extra * 1e3:.3g} ms more: too little against the link's jitter"
    return TIMING_PROBES * (TIMING_LENGTH - 1) / extra / 1e9


def fingerprint(device: Device, library: ProfileLibrary | None = None,
                client: RuntimeClient | None = None, *, declared_soc: str | None = None) -> FingerprintReport:
    """Identity plus behavioural signature of the DUT's NPU microcode, and the verdict.

    Uses one getprop call, the runtime's identity and one probe batch (push + call); with a
    station clock on the client, two more batches time the NPU. `declared_soc`: the station's
    inventory for the bay. Raises UnsupportedCapability when the runtime offers no probe interface.
    """
    library = library or load_library()
    client = client or RuntimeClient(device)
    runtime_before, device_before = client.runtime_calls, client.device_calls
    props = parse_getprop(device.run("getprop"))
    identity = client.identity()
    client.require("probe")
    plan = probe_plan()
    results = client.probe([p.probe for p in plan])
    fits = fit(plan, results)
    soc_model = props.get("ro.soc.model") or props.get("ro.board.platform", "")
    report = FingerprintReport(
        device=device.name, serial=props.get("ro.serialno", ""), soc_manufacturer=props.get("ro.soc.manufacturer", ""),
        soc_model=soc_model, board_platform=props.get("ro.board.platform", ""),
        # the runtime's strings are the phone's: shown with control characters made visible, as getprop's are
        runtime_version=printable(str(identity.runtime_version)), model=printable(str(identity.model)),
        microcode=printable(str(identity.microcode)),
        verdict=INCONSISTENT, measured=fits[0] if len(fits) == 1 else None,
        probes=[{"id": r.id, "length": r.length, "result": r.result, "exact": p.exact}
                for p, r in zip(plan, results)],
        runtime_calls=client.runtime_calls - runtime_before,
        device_calls=client.device_calls - device_before + 1,  # + the getprop
        profile_key=", ".join(sorted({k.key_id + (" (dev)" if k.is_dev else "") for k in library.trusted})),
        declared_soc=declared_soc)
    try:
        timing = measure_throughput(client)
    except BenchError as exc:  # a runtime that refuses the long probes: no timing, said so
        timing = f"timing probes refused: {exc}"
    report.gmac_per_s, report.timing_note = (timing, "") if isinstance(timing, float) else (None, timing)
    report.runtime_calls = client.runtime_calls - runtime_before
    report.device_calls = client.device_calls - device_before + 1
    _judge(report, library, fits)
    _judge_identity(report, library)
    log.info("%s: %s", device.name, report.summary())
    return report


def _judge(report: FingerprintReport, library: ProfileLibrary, fits: list[Signature]) -> None:
    build = library.build(report.soc_model, report.microcode)
    report.profile = build
    report.expected = build.signature if build else None
    if report.measured is None:
        report.verdict = INCONSISTENT
        report.detail = ("probe results fit no overflow model (raw results kept)" if not fits else
                         f"probe results fit several models ({', '.join(map(str, fits))})")
        return
    report.candidates = [f"{b.soc_model} {b.microcode}" for b in library.builds_with_signature(report.measured)]
    report.suggested_adapter = _suggest_adapter(library, report.measured)
    if build is None:
        report.verdict = UNKNOWN
        elsewhere = library.builds_with_microcode(report.microcode)
        report.detail = (f"no profile for {report.soc_model} microcode {report.microcode!r}"
                         + (f" (that string is profiled for {', '.join(b.soc_model for b in elsewhere)})" if elsewhere else ""))
        report.stub = profile_stub(report.soc_manufacturer, report.soc_model, report.microcode, report.measured,
                                   report.suggested_adapter,
                                   f"measured {report.measured} on {report.device} (serial {report.serial})")
    elif build.signature == report.measured:
        report.verdict = KNOWN
        report.adapter = build.adapter
        report.detail = f"matches {build.where}"
    else:
        report.verdict = MISMATCH
        same = [c for c in report.candidates if c.startswith(report.soc_model + " ")]
        report.detail = (f"version string claims {build.soc_model} {build.microcode!r} ({build.signature}, "
                         f"{build.where}) but the NPU behaves as {report.measured}"
                         + (f", like {', '.join(same)}" if same else "") + ": not trusted, no adapter applied")


def _judge_identity(report: FingerprintReport, library: ProfileLibrary) -> None:
    """Declared (inventory), reported (getprop) and fingerprinted (behaviour) SoC must agree."""
    if report.measured is None:
        return
    behaves = set(library.socs)
    if report.verdict != UNKNOWN:  # an unprofiled build's signature says nothing about its SoC
        behaves &= {b.soc_model.upper() for b in library.builds_with_signature(report.measured)}
    if report.gmac_per_s is not None:
        behaves &= {m for m, soc in library.socs.items() if soc.npu_gmac_per_s
                    and abs(report.gmac_per_s / soc.npu_gmac_per_s - 1.0) <= TIMING_TOLERANCE}
    report.behaves_like = sorted(behaves)
    reported = report.soc_model.upper()
    problems = []
    if report.declared_soc and report.declared_soc.upper() != reported:
        problems.append(f"the station's inventory says {report.declared_soc}, the phone says {report.soc_model}")
    known_soc = library.socs.get(reported)
    if known_soc is not None and reported not in behaves:
        speed = (f" at {report.gmac_per_s:.3g} GMAC/s (an {report.soc_model} does "
                 f"{known_soc.npu_gmac_per_s:.3g})" if report.gmac_per_s is not None and known_soc.npu_gmac_per_s
                 else "")
        like = ", ".join(report.behaves_like) or "no profiled SoC"
        problems.append(f"its NPU behaves as {report.measured}{speed}, like {like}, not an {report.soc_model}")
    if problems:
        report.verdict, report.adapter = MISMATCH, None
        report.detail = f"identity: {'; '.join(problems)}: not trusted, no adapter applied; {report.detail}"


def fingerprint_verdict(report: FingerprintReport) -> Verdict:
    """The fingerprint as a recorded verdict: known passes, unknown is information (with a stub
    to review), mismatch and inconsistent fail."""
    outcome = {KNOWN: Outcome.PASS, UNKNOWN: Outcome.INFO}.get(report.verdict, Outcome.FAIL)
    return Verdict("npu_microcode_fingerprint", None if report.measured is None else report.measured.bits,
                   "bits", outcome, statistic=f"{report.verdict} build, accumulator width",
                   n=len(report.probes),
                   detail=f"{report.verdict}: {report.detail}",
                   extra={"verdict": report.verdict, "microcode": report.microcode, "soc_model": report.soc_model,
                          "measured": report.measured.to_dict() if report.measured else None,
                          "expected": report.expected.to_dict() if report.expected else None,
                          "adapter": report.adapter, "runtime_calls": report.runtime_calls,
                          "identity": {"declared": report.declared_soc, "reported": report.soc_model,
                                       "behaves_like": report.behaves_like, "gmac_per_s": report.gmac_per_s,
                                       "timing": report.timing_note or "timed on the station clock"}})

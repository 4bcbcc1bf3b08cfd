"""NPU numerics (claim 9): fingerprint the microcode, apply the profile's overflow adapter, and
prove generated tokens bit-exact against the golden reference; unknown and mismatched builds are
flagged, never trusted with an adapter."""
from __future__ import annotations

import os

import pytest

from phonebench.bench.phone.adapters import apply_adapter, choose_adapter
from phonebench.bench.phone.fingerprint import FingerprintReport, fingerprint, fingerprint_verdict, overflow_probes
from phonebench.bench.specs.profiles import ProfileLibrary, load_library
from phonebench.bench.specs.references import find_reference, golden_folder
from phonebench.drivers.llamacpp import DEFAULT_DIR, LlamaCpp
from phonebench.drivers.runtime import RuntimeClient, RuntimeCommandFailed

# The bench's own computation: probe answers and tokens against references computed off the phone.
pytestmark = [pytest.mark.matrix, pytest.mark.acceptance, pytest.mark.regression, pytest.mark.evidence("measured"),
              pytest.mark.capabilities("probe")]

LLAMACPP_MODEL = os.environ.get("PHONEBENCH_LLAMACPP_MODEL", "/data/local/tmp/models/model.gguf")


@pytest.fixture(scope="module")
def library() -> ProfileLibrary:
    return load_library()


@pytest.fixture
def report(dut, runtime: RuntimeClient, library: ProfileLibrary, station, clock) -> FingerprintReport:
    """Its own client (the call count covers the whole fingerprint), timed on the station clock;
    the station's inventory says which SoC the bay should hold."""
    return fingerprint(dut, library, RuntimeClient(dut, clock=clock), declared_soc=station.dut(dut.name).expected_soc)


def _golden_prompts(runtime: RuntimeClient) -> list[tuple[int, list[int], list[int]]]:
    """(seed, prompt, golden tokens) for the model the runtime serves, or skip."""
    identity = runtime.identity()
    reference = find_reference(identity.model, identity.model_sha256)
    if reference is None:
        pytest.skip(f"no golden reference for model {identity.model!r} ({identity.model_sha256}) "
                    f"in {golden_folder()}: add one computed off the phone")
    return [(c.seed, list(c.prompt), list(c.golden)) for c in reference.cases]


def _differing(runtime: RuntimeClient, cases: list[tuple[int, list[int], list[int]]]) -> tuple[int, list[dict]]:
    total, raw = 0, []
    for seed, prompt, golden in cases:
        tokens = runtime.generate(len(golden), seed=seed, prompt=prompt).tokens
        total += sum(a != b for a, b in zip(tokens, golden)) + abs(len(tokens) - len(golden))
        raw.append({"seed": seed, "prompt": prompt, "golden": golden, "device": tokens})
    return total, raw


@pytest.mark.acceptance(check="fingerprint")
def test_microcode_fingerprint(report: FingerprintReport, sla, record):
    """Known builds pass; an unknown build is recorded with a profile stub to review; a build
    whose version string and behaviour disagree, or whose probes fit no model, fails."""
    record.raw("fingerprint", report.to_dict())
    if report.stub:
        record.raw("profile-stub", {"toml": report.stub})
    record(fingerprint_verdict(report))
    record.judge(sla, "fingerprint_runtime_calls", report.runtime_calls,
                 detail=f"{report.device_calls} device round trips in all")


@pytest.mark.acceptance(check="adapter")
def test_tokens_bit_exact_after_adapter(runtime: RuntimeClient, report: FingerprintReport, library, sla, record):
    """Without the adapter a narrow accumulator may change tokens (recorded); with the
    profile's adapter every token equals the golden reference."""
    if not report.trusted:
        pytest.skip(f"{report.verdict} build: no adapter is trusted ({report.detail})")
    cases = _golden_prompts(runtime)
    adapter = choose_adapter(report, library)
    apply_adapter(runtime, None, library.trusted)
    raw_diff, raw_tokens = _differing(runtime, cases)
    outcome = apply_adapter(runtime, adapter, library.trusted)
    diff, tokens = _differing(runtime, cases)
    record.raw("tokens", {"without_adapter": raw_tokens, "with_adapter": tokens})
    n = sum(len(golden) for _, _, golden in cases)
    record.check("tokens_differing_without_adapter", raw_diff, "tokens", None, n=n,
                 detail=f"{report.measured} accumulator, raw NPU")
    record.judge(sla, "tokens_differing_from_golden", diff, n=n,
                 detail=f"adapter {outcome.adapter or 'none'} ({outcome.action}) on {report.measured}")


@pytest.mark.acceptance(check="adapter")
def test_overflow_probes_exact_through_adapter(runtime: RuntimeClient, report: FingerprintReport, library, sla,
                                              record):
    """The overflow probes of the measured width come out exact through the active adapter."""
    if not report.trusted:
        pytest.skip(f"{report.verdict} build: no adapter is trusted ({report.detail})")
    adapter = choose_adapter(report, library)
    if adapter is None:
        pytest.skip(f"{report.measured}: the profile needs no adapter")
    apply_adapter(runtime, adapter, library.trusted)
    plan = overflow_probes(report.measured.bits)
    results = runtime.probe([p.probe for p in plan], with_adapter=True)
    wrong = [r.id for p, r in zip(plan, results) if r.result != p.exact]
    record.raw("probes_with_adapter", [{"id": r.id, "result": r.result, "exact": p.exact} for p, r in zip(plan, results)])
    record.judge(sla, "overflow_probes_wrong_with_adapter", len(wrong), n=len(plan),
                 detail=", ".join(wrong) or f"all exact through {adapter.name}")


@pytest.mark.acceptance(check="adapter")
def test_corrupt_adapter_transfer_keeps_previous(dut, runtime: RuntimeClient, report: FingerprintReport, library, sla,
                                                record):
    """A transfer that arrives corrupted is refused by the device; the active adapter stays."""
    if not report.trusted or choose_adapter(report, library) is None:
        pytest.skip(f"{report.verdict} build with {report.adapter or 'no'} adapter: nothing to protect")
    adapter = choose_adapter(report, library)
    apply_adapter(runtime, adapter, library.trusted)
    before = runtime.adapter_status().active
    remote = "/data/local/tmp/phonebench/adapters/corrupt-transfer.json"
    dut.push_bytes(adapter.data[:-7] + b"garbage", remote)
    try:
        runtime.adapter_install(remote, adapter.sha256)
        refused = False
    except RuntimeCommandFailed:
        refused = True
    after = runtime.adapter_status().active
    dut.shell(["rm", "-f", remote])
    record.judge(sla, "corrupt_adapter_refused", int(refused), detail="device checksum check on install")
    record.judge(sla, "active_adapter_unchanged", int(after == before), detail=f"{before} -> {after}")


@pytest.mark.evidence("self-reported")  # llama-bench's and llama-completion's own timings
def test_llamacpp_throughput(dut, record):
    """Decode and prompt throughput from llama-bench, when llama.cpp is on the phone."""
    llama = LlamaCpp(dut, LLAMACPP_MODEL)
    if "llama-bench" not in llama.installed():
        pytest.skip(f"llama.cpp not installed on {dut.name} (looked in {DEFAULT_DIR}/bin)")
    results = llama.bench(n_prompt=128, n_gen=32, repetitions=3)
    record.raw("llama-bench", [r.__dict__ for r in results])
    for result in results:
        record.check(f"llamacpp_{result.test}_tokens_per_s", result.avg_ts, "tok/s", None, n=len(result.samples_ts),
                     detail=f"{result.model_type} {result.backends} build {result.build_commit}")

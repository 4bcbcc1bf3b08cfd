"""Tokens are checked, not only timed (claim 3-5; docs/evidence.md): the bench's own reference
model, prompts drawn per run, and the forger that streams a made-up first token."""
from __future__ import annotations

import dataclasses

import pytest

from bench.adapters import shipped_numerics
from bench.checks import tokens
from bench.core.verdict import Outcome
from bench.reference_model import ReferenceModel, fresh_cases, reference_for, reference_model
from bench.references import find_reference
from bench.sla import load_profile
from device_double import WorldClock, make_device
from drivers.runtime import Generation, RuntimeClient
from emulation import tinymodel

NPU = "SM8650-ES"


def few(entry, n: int = 20):  # noqa: ANN001, ANN201 - negative controls need no proof-sized sample
    return dataclasses.replace(entry, min_samples=min(entry.min_samples, n))


def test_the_benchs_reference_model_is_the_published_model():
    """Same weights digest as the build the phones serve, and the shipped golden tokens."""
    ref = reference_model()
    golden = find_reference(ref.name, ref.sha256)
    assert golden is not None and ref.sha256 == tinymodel.shared_model().sha256
    for case in golden.cases:
        assert ref.tokens(case.prompt, golden.max_tokens, case.seed) == list(case.golden)
    assert reference_for(ref.name, "0" * 64) is None and reference_for("another-model", ref.sha256) is None


def test_fresh_prompts_are_the_models_answer_and_differ_between_runs():
    first, second = fresh_cases(2, 12), fresh_cases(2, 12)
    assert first != second  # drawn from the system's entropy per run
    case = first[0]
    assert ReferenceModel().tokens(case.prompt, 6, case.seed) == \
        tinymodel.shared_model().generate(list(case.prompt), 6, case.seed)


def _runs_of(cases, streams) -> tokens.TokenRuns:  # noqa: ANN001
    runs = tokens.TokenRuns(reference=reference_model(), drawn=list(cases))
    for case, ids in zip(cases, streams):
        runs.add(Generation(tokens=ids, token_times=[0.1 * i for i in range(len(ids))], start_time=0.0,
                            done_time=1.0, prompt_tokens=len(case.prompt)), case, len(ids))
    return runs


def test_a_stream_replayed_from_an_earlier_run_is_not_the_models():
    earlier, now = fresh_cases(1, 12), fresh_cases(1, 12)
    replay = reference_model().tokens(earlier[0].prompt, 4, earlier[0].seed)
    assert _runs_of(earlier, [replay]).fabricated == []
    assert _runs_of(now, [replay]).fabricated == [(0, 0)]
    honest = reference_model().tokens(now[0].prompt, 4, now[0].seed)
    assert _runs_of(now, [honest[:2] + [(honest[2] + 1) % 512, honest[3]]]).fabricated == [(0, 2)]


def test_fabricated_first_token_fails_as_fabricated_output():
    """Slow prompt processing hidden by a made-up token streamed with the start line: every
    timestamp is true, the token is not the model's."""
    device = make_device(NPU, "EMU-forger", sla_persona="fabricated-first-token")
    runtime = RuntimeClient(device, clock=WorldClock(device))
    assert shipped_numerics(runtime) is not None
    gen = runtime.generate(3, seed=5, prompt=[1, 2, 3, 4])
    assert gen.arrivals.token_times[0] - gen.arrivals.start_t < 1e-3  # it would pass on time alone
    verdict = tokens.first_token_check(runtime, few(load_profile("default").get("first_token_p99")), n=8).verdicts[0]
    assert verdict.outcome is Outcome.FAIL and "fabricated output" in verdict.detail
    assert verdict.extra["fabricated_inferences"] == verdict.extra["report"]["intervals"]  # every one
    assert verdict.value is None  # no inference delivered the model's first token


def test_without_a_reference_tokens_cannot_be_told_from_invented_ones(monkeypatch):
    device = make_device("SM8750-MP", "EMU-noref")  # a 32-bit accumulator: exact without an adapter
    runtime = RuntimeClient(device, clock=WorldClock(device))
    monkeypatch.setattr(tokens, "reference_for", lambda model, sha: None)
    verdict = tokens.first_token_check(runtime, few(load_profile("default").get("first_token_p99")), n=8).verdicts[0]
    assert verdict.outcome is Outcome.INCONCLUSIVE and "no reference" in verdict.detail
    assert verdict.extra["tokens_checked"] is False


@pytest.mark.parametrize("persona", ["nominal"])
def test_honest_tokens_are_the_models(persona):
    device = make_device(NPU, f"EMU-{persona}", sla_persona=persona)
    runtime = RuntimeClient(device, clock=WorldClock(device))
    assert shipped_numerics(runtime) is not None
    result = tokens.first_token_check(runtime, few(load_profile("default").get("first_token_p99")), n=8)
    verdict = result.verdicts[0]
    assert verdict.outcome is Outcome.PASS and "every token is the model's" in verdict.detail
    assert len(result.raw["first_token_prompts"]["cases"]) == tokens.PROMPT_CASES
    assert "first_token_prompts" in verdict.raw


FORGERS = ("fabricated-first-token", "patched-kills", "faked-redundancy", "phantom-gpu-load", "consistent-counters")


def test_every_forger_is_selectable_as_a_station_persona():
    """`bench run --persona NAME` takes any name the emulated station knows."""
    from emulation.station import sla_personas

    assert set(FORGERS) <= sla_personas()

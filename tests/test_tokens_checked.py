"""Tokens are checked, not only timed (claims 3-5; docs/evidence.md): on emulated phones, the
forger that streams a made-up first token fails, an honest phone's tokens are the model's, and a
model without a reference leaves the tokens unchecked."""
from __future__ import annotations

import dataclasses

import pytest

from phonebench.bench.phone.adapters import shipped_numerics
from phonebench.bench.checks import tokens
from phonebench.core.verdict import Outcome
from phonebench.bench.specs.sla import load_profile
from device_double import WorldClock, make_device
from phonebench.drivers.runtime import RuntimeClient
from phonebench.core import signing

NPU = "SM8650-ES"


@pytest.fixture(autouse=True, scope="module")
def development_station():
    """These tests stand for a development station: it opts in to the shipped development key."""
    with signing.trusting(None, development=True):
        yield


def few(entry, n: int = 20):  # noqa: ANN001, ANN201 - negative controls need no proof-sized sample
    return dataclasses.replace(entry, min_samples=min(entry.min_samples, n))


def test_fabricated_first_token_fails_as_fabricated_output():
    """Slow prompt processing hidden by a made-up token streamed with the start line: every
    timestamp is true, the token is not the model's."""
    device = make_device(NPU, "EMU-forger", sla_persona="fabricated-first-token")
    runtime = RuntimeClient(device, clock=WorldClock(device))
    assert shipped_numerics(runtime) is not None
    gen = runtime.generate(3, seed=5, prompt=[1, 2, 3, 4])
    assert gen.arrivals.token_times[0] - gen.arrivals.start_t < 1e-3  # it would pass on time alone
    verdict = tokens.first_token_check(runtime, first_token=few(load_profile("default").get("first_token_p99")), n=8).verdicts[0]
    assert verdict.outcome is Outcome.FAIL and "fabricated" in verdict.explanation
    assert verdict.extra["fabricated_inferences"] == verdict.extra["report"]["intervals"]  # every one
    assert verdict.value is None  # no inference delivered the model's first token


def test_without_a_reference_tokens_cannot_be_told_from_invented_ones(monkeypatch):
    device = make_device("SM8750-MP", "EMU-noref")  # a 32-bit accumulator: exact without an adapter
    runtime = RuntimeClient(device, clock=WorldClock(device))
    monkeypatch.setattr(tokens, "reference_for", lambda model, sha: None)
    verdict = tokens.first_token_check(runtime, first_token=few(load_profile("default").get("first_token_p99")), n=8).verdicts[0]
    assert verdict.outcome is Outcome.INCONCLUSIVE and "no reference" in verdict.explanation
    assert verdict.extra["tokens_checked"] is False


@pytest.mark.parametrize("persona", ["nominal"])
def test_honest_tokens_are_the_models(persona):
    device = make_device(NPU, f"EMU-{persona}", sla_persona=persona)
    runtime = RuntimeClient(device, clock=WorldClock(device))
    assert shipped_numerics(runtime) is not None
    result = tokens.first_token_check(runtime, first_token=few(load_profile("default").get("first_token_p99")), n=8)
    verdict = result.verdicts[0]
    assert verdict.outcome is Outcome.PASS and "every token is the model's" in verdict.explanation
    cases = result.raw["first_token_prompts"]["cases"]
    assert len(cases) >= 8 and len({tuple(c["prompt"]) for c in cases}) == len(cases)  # a fresh prompt each
    assert "first_token_prompts" in verdict.raw


FORGERS = ("fabricated-first-token", "patched-kills", "faked-redundancy", "phantom-gpu-load", "consistent-counters")


def test_every_forger_is_selectable_as_a_station_persona():
    """`bench run --persona NAME` takes any name the emulated station knows."""
    from phonebench.emulation.station import sla_personas

    assert set(FORGERS) <= sla_personas()

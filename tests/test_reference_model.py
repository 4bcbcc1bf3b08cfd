"""The bench's own reference model (bench/specs/reference_model.py): the published model, computed
independently of any phone, on prompts drawn per run; a replayed stream is not the model's."""
from __future__ import annotations

from phonebench.bench.checks import tokens
from phonebench.bench.specs.reference_model import fresh_cases, reference_for, reference_model
from phonebench.bench.specs.references import find_reference
from phonebench.drivers.runtime import Generation
from phonebench.emulation import tinymodel


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
    assert reference_model().tokens(case.prompt, 6, case.seed) == \
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

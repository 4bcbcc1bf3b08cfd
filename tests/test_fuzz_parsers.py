"""Fast fuzz tier: every parser of outside bytes (tests/fuzz_targets.py) on a few hundred
derandomized examples; a bad input may only raise the parser's own error type. The long tier is
`make fuzz` (benchmarks/fuzz_long.py, >= 10,000 examples each)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings

from fuzz_targets import CI_PROFILE, TARGETS, Target, run_one

FAST = settings.get_profile(CI_PROFILE)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # overflow in statistics of 1e308 samples
@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_parser_refuses_bad_input_with_its_own_error(target: Target) -> None:
    @FAST
    @given(target.strategy)
    def check(value: object) -> None:
        run_one(target, value)

    check()

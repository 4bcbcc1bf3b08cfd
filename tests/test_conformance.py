"""Each emulated model against its programming manual, as data: every dialogue in
tests/data/conformance/<family>.toml replays on a fresh emulator (one generic test, no code per
manual section). The conformance figures are printed by benchmarks/bench_conformance.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from phonebench.emulation.instruments.conformance import Exchange, Step, check_step, implemented, load_tables, replay
from phonebench.emulation.instruments.registry import emulated_families

TABLES = load_tables(Path(__file__).parent / "data" / "conformance")
CASES = [(table, dialogue) for table in TABLES for dialogue in table.dialogues]


@pytest.mark.parametrize("table, dialogue", CASES, ids=[f"{t.family}: {d.name}" for t, d in CASES])
def test_manual_dialogue_replays(table, dialogue):
    failures = replay(table, dialogue)
    assert not failures, f"{table.family} ({dialogue.source}):\n" + "\n".join(failures)


def test_every_emulated_scpi_family_has_a_table():
    families = {family for role in ("scope", "supply", "stimulus") for family in emulated_families()[role]}
    families.discard("qoitech-otii")  # JSON over TCP, not SCPI: tests/test_emulated_otii.py
    families |= {"keysight-daq970a", "fluke-1529"}  # the SCPI thermometers (the others are not SCPI)
    assert {t.family for t in TABLES} == families


@pytest.mark.parametrize("table", TABLES, ids=[t.family for t in TABLES])
def test_every_model_answers_the_ieee_488_2_mandatory_commands(table):
    mandatory = ["*CLS", "*ESE 0", "*ESE?", "*ESR?", "*IDN?", "*OPC", "*OPC?", "*RST", "*SRE 0", "*SRE?",
                 "*STB?", "*TST?", "*WAI"]
    assert set(mandatory) <= set(table.commands)
    done, _ = implemented(table.__class__(table.family, table.role, table.manual, mandatory))
    assert done == mandatory


def test_a_step_fails_on_a_wrong_answer_an_unexpected_error_or_an_answer_to_a_refused_query():
    assert check_step(Step("X?", answer="1"), Exchange("1", ())) is None
    assert "expected '1'" in check_step(Step("X?", answer="1"), Exchange("2", ()))
    assert "errors [-113]" in check_step(Step("X?"), Exchange(None, (-113,)))
    assert "although refused" in check_step(Step("X?", error=-222), Exchange("5", (-222,)))
    assert "expected to match" in check_step(Step("X?", pattern="^#8"), Exchange("#41000", ()))

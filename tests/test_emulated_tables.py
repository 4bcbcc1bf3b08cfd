"""The emulated N6705C, 33500B and DAQ970A as command tables (emulation/instruments/*_table.py).

- Behaviour unchanged: the answers and error queues the servers gave, before their command trees
  became tables, to 300 seeded random command scripts each (recorded by tests/emu_scripts.py in
  tests/data/emulated_tables/) are replayed and must be byte-identical.
- The manual's command list (tests/data/emulated_tables/<family>.toml, naming the manual) and the
  table agree: every listed command is a row, every row is listed or marked as an extension.
- No header is accepted by two rows, so the rows' order cannot change which one answers.
- No function in emulation/instruments/ is longer than 60 lines.
"""
from __future__ import annotations

import ast
import itertools
import re
import tomllib
from pathlib import Path

import pytest
from emu_scripts import INSTRUMENTS, TRANSCRIPTS as DATA, load, run, server_for

import phonebench.emulation.instruments as instruments
from phonebench.emulation.instruments import awg_table, daq970a_table, power_analyzer_table
from phonebench.emulation.instruments.scpi import resolve_header
from phonebench.emulation.instruments.table import Command, Row, forms

INSTRUMENTS_DIR = Path(instruments.__file__).parent


@pytest.mark.slow  # 300 scripts per instrument: seconds each (make test runs it)
@pytest.mark.parametrize("family", sorted(INSTRUMENTS))
def test_recorded_scripts_replay_byte_identical(family):
    mismatches = []
    for recorded in load(family):
        messages = [step[0] for step in recorded["steps"]]
        for want, got in zip(recorded["steps"], run(family, recorded["seed"], messages)):
            if want != got:
                mismatches.append(f"script {recorded['seed']}: {want[0]!r}: recorded {want[1:]!r}, now {got[1:]!r}")
    assert not mismatches, f"{len(mismatches)} answers differ:\n" + "\n".join(mismatches[:20])


# --- the manual's command list against the table --------------------------------------------------
TABLES = {"keysight-n6705c": power_analyzer_table.COMMANDS, "keysight-33500b": awg_table.COMMANDS,
          "keysight-daq970a": daq970a_table.COMMANDS}


def manual_list(family: str) -> dict:
    return tomllib.loads((DATA / f"{family}.toml").read_text())


def disagreements(listed: list[str], rows: tuple[Row, ...]) -> list[str]:
    """Listed commands the table lacks, and table forms neither listed nor marked as extensions."""
    documented = set(forms(rows, extensions=False))
    missing = [f"listed, not in the table: {c}" for c in listed if c not in set(forms(rows))]
    unlisted = [f"in the table, not listed nor an extension: {c}" for c in sorted(documented - set(listed))]
    return missing + unlisted


@pytest.mark.parametrize("family", sorted(TABLES))
def test_the_table_and_the_manual_list_agree(family):
    data = manual_list(family)
    assert data["family"] == family and data["manual"]
    assert len(data["commands"]) == len(set(data["commands"])), "a command listed twice"
    assert not disagreements(data["commands"], TABLES[family])


def test_an_unlisted_row_must_be_marked_as_an_extension():
    def nothing(server, call):
        return None
    rows = (Command("OUTPut", nothing, nothing), Command("DISPlay:TEXT", nothing), Command("X:OWN", nothing,
                                                                                           extension=True))
    assert disagreements(["OUTPut", "OUTPut?", "DISPlay:TEXT"], rows) == []
    assert disagreements(["OUTPut", "DISPlay:TEXT", "SYSTem:BEEP"], rows) == [
        "listed, not in the table: SYSTem:BEEP", "in the table, not listed nor an extension: OUTPut?"]


@pytest.mark.parametrize("family", sorted(TABLES))
def test_every_table_row_is_installed(family):
    patterns = server_for(family, 0).tree.patterns
    assert set(forms(TABLES[family])) <= set(patterns)


# --- the table's order does not matter ----------------------------------------------------------------
def concrete_headers(pattern: str) -> list[str]:
    """Every way to write a pattern: each node long or short, optional nodes in or out, suffix or not."""
    body = pattern.rstrip("?")
    if body.startswith("*"):
        return [pattern]
    choices = []
    for optional, word in re.findall(r"(\[?):?([A-Za-z*]+(?:<n>)?)\]?", body):
        name = word.replace("<n>", "")
        short = "".join(ch for ch in name if ch.isupper())
        written = [w + s for w in {name, short} for s in (["", "2"] if word.endswith("<n>") else [""])]
        choices.append(written + ([""] if optional else []))
    query = "?" if pattern.endswith("?") else ""
    return [":".join(w for w in combo if w) + query for combo in itertools.product(*choices)]


@pytest.mark.parametrize("family", sorted(TABLES))
def test_every_header_reaches_its_own_row(family):
    """No header two rows both accept: the tree's first-match lookup never depends on the rows' order,
    so writing a tree as a table (its queries beside their commands) cannot change what answers."""
    tree = server_for(family, 0).tree
    clashes = []
    for pattern, (_, _, handler) in zip(tree.patterns, tree._entries):
        for header in concrete_headers(pattern):
            words, query, _ = resolve_header(header, [])
            found = tree.lookup(words, query)
            if found is None or found[0] is not handler:
                clashes.append(f"{header} ({pattern})")
    assert not clashes, clashes[:10]


# --- small functions ------------------------------------------------------------------------------------
def test_no_function_in_the_emulated_instruments_is_longer_than_60_lines():
    long = []
    for path in sorted(INSTRUMENTS_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 60:
                    long.append(f"{path.relative_to(INSTRUMENTS_DIR)}: {node.name} ({length} lines)")
    assert not long, long

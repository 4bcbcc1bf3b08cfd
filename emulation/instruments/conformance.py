"""Conformance of an emulated model to its programming manual, kept as data (tests/data/conformance).

A model's file (TOML) holds the manual's command table for the subsystems the emulator models,
each command with an example use, and dialogues written from the manual's examples:

    family = "keysight-infiniivision"
    role = "scope"
    manual = "InfiniiVision 3000T X-Series Programmer's Guide"
    commands = [":WAVeform:POINts:MODE RAW", ":WAVeform:POINts:MODE?", ...]

    [[dialogue]]
    name = "points mode answers its short form"
    source = ":WAVeform:POINts:MODE"
    steps = [[":WAV:POIN:MODE MAX"], [":WAV:POIN:MODE?", "MAX"], [":DIG BOGUS", -224]]

A step is `[message]` (no error; a query may answer anything), `[message, "answer"]` (exact),
`[message, "~regex"]` (searched in the answer), `[message, -224]` (that error queued, no answer),
or a table `{send = ..., answer|match = ..., error = ...}` for an answer and an error together.
After each step the error queue is drained: any entry not expected fails the step.

Messages go through the server's own `handle_message`, in process (the parsing, the tree and the
error queue are the ones a socket client reaches). The conformance figure of a model is the
share of its documented commands that the emulator implements: a command is implemented when
sending its example (after *RST) leaves no -113 "Undefined header" and no entry saying the
emulator does not model it (the emulators' own refusals say "not modelled"); other errors, from
an example's arguments meeting the state, still count it as implemented. Among the implemented,
`stored_only` are the commands the emulator stores and answers back without their setting
acting on anything it models (InstrumentServer.add_setting).
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .registry import make_server
from .scpi import resolve_header
from .server import InstrumentServer
from ..world import World

UNDEFINED = -113
NOT_MODELLED = "not modelled"  # how the emulators word a refusal of something the real model has


@dataclass(frozen=True)
class Step:
    send: str
    answer: str | None = None  # exact answer expected
    pattern: str | None = None  # regex searched in the answer
    error: int | None = None  # error code expected in the queue


@dataclass(frozen=True)
class Dialogue:
    name: str
    source: str
    steps: tuple[Step, ...]


@dataclass
class ModelTable:
    family: str
    role: str
    manual: str
    commands: list[str]
    dialogues: list[Dialogue] = field(default_factory=list)


@dataclass(frozen=True)
class Exchange:
    answer: str | None
    errors: tuple[int, ...]
    entries: tuple[str, ...] = ()

    def unmodelled(self) -> bool:
        """The emulator does not implement what was sent (an undefined header or its own refusal)."""
        return UNDEFINED in self.errors or any(NOT_MODELLED in entry for entry in self.entries)


class Capture:
    """Stands in for a client connection: collects what the server sends."""

    def __init__(self, peer: str = "conformance") -> None:
        self.peer = peer
        self.sent: list[bytes] = []

    def send(self, data: bytes) -> None:
        self.sent.append(data)

    def send_line(self, line: bytes) -> None:
        self.sent.append(line)


def _step(raw: object, where: str) -> Step:
    if isinstance(raw, dict):
        return Step(str(raw["send"]), raw.get("answer"), raw.get("match"), raw.get("error"))
    if not isinstance(raw, list) or not 1 <= len(raw) <= 2 or not isinstance(raw[0], str):
        raise ValueError(f"{where}: a step is [message], [message, answer-or-error] or a table; got {raw!r}")
    if len(raw) == 1:
        return Step(raw[0])
    expected = raw[1]
    if isinstance(expected, int):
        return Step(raw[0], error=expected)
    if isinstance(expected, str) and expected.startswith("~"):
        return Step(raw[0], pattern=expected[1:])
    return Step(raw[0], answer=str(expected))


def load_table(path: Path) -> ModelTable:
    data = tomllib.loads(path.read_text())
    dialogues = [Dialogue(d["name"], d.get("source", ""),
                          tuple(_step(s, f"{path.name}: {d['name']}") for s in d["steps"]))
                 for d in data.get("dialogue", [])]
    return ModelTable(data["family"], data["role"], data["manual"], list(data["commands"]), dialogues)


def load_tables(folder: Path) -> list[ModelTable]:
    return [load_table(path) for path in sorted(folder.glob("*.toml"))]


class Session:
    """One emulated instrument, spoken to message by message."""

    def __init__(self, table: ModelTable, seed: int = 1) -> None:
        self.server: InstrumentServer = make_server(table.role, table.family, World(seed=seed))
        self.conn = Capture()

    def exchange(self, message: str) -> Exchange:
        """Send one program message; its answer (None if none) and the error codes it queued."""
        self.conn.sent.clear()
        self.server.handle_message(self.conn, message.encode("latin-1"))  # type: ignore[arg-type]
        raw = b"".join(self.conn.sent)
        answer = raw.decode("latin-1").removesuffix("\n") if raw else None
        entries = tuple(self.server.errors)
        self.server.errors.clear()
        return Exchange(answer, tuple(int(entry.split(",", 1)[0]) for entry in entries), entries)


def check_step(step: Step, got: Exchange) -> str | None:
    """What is wrong with an exchange for a step, or None."""
    expected_errors = () if step.error is None else (step.error,)
    if got.errors != expected_errors:
        return f"`{step.send}`: errors {list(got.errors) or 'none'}, expected {list(expected_errors) or 'none'}"
    if step.error is not None and step.answer is None and step.pattern is None and got.answer is not None:
        return f"`{step.send}`: answered {got.answer[:80]!r} although refused"
    if step.answer is not None and got.answer != step.answer:
        return f"`{step.send}`: answered {None if got.answer is None else got.answer[:80]!r}, expected {step.answer!r}"
    if step.pattern is not None and (got.answer is None or not re.search(step.pattern, got.answer, re.DOTALL)):
        return f"`{step.send}`: answered {None if got.answer is None else got.answer[:80]!r}, " \
               f"expected to match {step.pattern!r}"
    return None


def replay(table: ModelTable, dialogue: Dialogue) -> list[str]:
    """Run a dialogue on a fresh instrument; the failures (empty when it conforms)."""
    session = Session(table)
    failures = []
    for step in dialogue.steps:
        problem = check_step(step, session.exchange(step.send))
        if problem:
            failures.append(problem)
    return failures


def stored_only(table: ModelTable, commands: list[str]) -> list[str]:
    """The commands among `commands` that the emulator only stores and answers back."""
    tree = Session(table).server.tree
    out = []
    for command in commands:
        words, query, _ = resolve_header(command.split(" ", 1)[0], [])
        found = tree.lookup(words, query)
        if found is not None and getattr(found[0], "stored_only", False):
            out.append(command)
    return out


def implemented(table: ModelTable) -> tuple[list[str], list[str]]:
    """(implemented, missing) among the model's documented commands."""
    session = Session(table)
    done, missing = [], []
    for command in table.commands:
        session.exchange("*RST")
        (missing if session.exchange(command).unmodelled() else done).append(command)
    return done, missing

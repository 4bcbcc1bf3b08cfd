"""The product's claims as data (bench/specs/claims.toml) and the claims x phones grid that opens the
report and the terminal summary: per claim and phone the worst outcome, the verdict that decided
it, the weakest evidence it rests on and the lab time spent. docs/claims.md's table is generated
from the same data (`python -m phonebench.bench.specs.claims`)."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from phonebench.core.verdict import Evidence, Verdict, verdicts_of

NOT_MEASURED = "not measured"
EVIDENCE_STRENGTH = {"measured": 2, "corroborated": 1, "reported": 0}  # weakest decides what a cell rests on
REPORTED = ("reported", "self-reported")  # the phone's word only


@dataclass(frozen=True)
class Claim:
    number: int
    name: str
    target: str
    how: str
    metrics: tuple[str, ...]


@lru_cache(maxsize=1)
def load_claims() -> tuple[Claim, ...]:
    """The claims table, in row order."""
    text = (resources.files("phonebench.bench.specs") / "claims.toml").read_text(encoding="utf-8")
    rows = tomllib.loads(text)["claim"]
    return tuple(Claim(int(r["number"]), str(r["name"]), str(r["target"]), str(r["how"]), tuple(r["metrics"]))
                 for r in rows)


def claim_of(v: Verdict, claims: tuple[Claim, ...] | None = None) -> int | None:
    """The claim a verdict speaks to: its own `claim` field, else the table's metric lists."""
    return claim_for(v.claim, v.metric, v.name, claims=claims)


def claim_for(claim: int | None, *names: str | None, claims: tuple[Claim, ...] | None = None) -> int | None:
    """The claim a verdict's fields name: `claim` when set, else the claim whose metrics list one
    of `names` (a name's dots read as underscores)."""
    if isinstance(claim, int):
        return claim
    known = {n for name in names if name for n in (name, name.replace(".", "_"))}
    return next((c.number for c in claims or load_claims() if known & set(c.metrics)), None)


def claims_markdown(claims: tuple[Claim, ...] | None = None) -> str:
    """The table of docs/claims.md."""
    lines = ["| # | Claim | Target | How the bench judges it |", "|---|---|---|---|"]
    lines += [f"| {c.number} | {c.name} | {c.target} | {c.how} |" for c in claims or load_claims()]
    return "\n".join(lines) + "\n"


@dataclass
class Cell:
    """One claim on one phone."""

    verdicts: list[Verdict] = field(default_factory=list)
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)  # nodeid -> test record
    order: tuple[str, ...] = ()  # the claim's metrics, the product's own first: shown first among equals

    @property
    def outcome(self) -> str:
        if not self.verdicts:
            return NOT_MEASURED
        return self.decisive.outcome.value

    @property
    def decisive(self) -> Verdict:
        """The verdict that decided the cell: the worst; of equals the one earliest in the claim's
        metrics (the product's own target before an acceptance or plausibility check)."""
        def rank(v: Verdict) -> int:
            return next((i for i, m in enumerate(self.order) if m in (v.metric, v.name)), len(self.order))

        if not self.verdicts:
            raise LookupError("a cell with no verdicts has no decisive one")
        return max(self.verdicts, key=lambda v: (v.outcome.severity, -rank(v)))

    @property
    def evidence(self) -> str:
        kinds = [v.evidence for v in self.verdicts]
        stated: list[str] = [k.value for k in kinds if k is not None]
        if not kinds:
            return ""
        if len(stated) < len(kinds):
            return "evidence unstated"
        return min(stated, key=lambda k: EVIDENCE_STRENGTH.get(k, -1))

    @property
    def reported(self) -> list[Verdict]:
        """The cell's verdicts that are only the phone's word (shown, never a PASS of their own)."""
        return [v for v in self.verdicts if v.evidence is Evidence.REPORTED]

    @property
    def on_reported_condition(self) -> list[Verdict]:
        """Verdicts measured by the bench under a condition only the phone vouches for (claim 5's
        GPU load level without a power analyzer): `extra.condition_evidence` reported."""
        return [v for v in self.verdicts if v.evidence is not Evidence.REPORTED
                and v.extra.get("condition_evidence") in REPORTED]

    @property
    def qualifier(self) -> str:
        """How much of a passing cell rests on the bench, when not all of it does: a claim that is
        partly the phone's word never shows a plain pass ("2 of 5 corroborated, 3 reported";
        "0 of 1 measured, 1 on a reported condition")."""
        reported, conditional = len(self.reported), len(self.on_reported_condition)
        if not (reported or conditional) or self.outcome not in ("pass", "info"):
            return ""
        independent = [v for v in self.verdicts if v.evidence is not Evidence.REPORTED
                       and v.extra.get("condition_evidence") not in REPORTED]
        kind = self._weakest(independent) or "measured"
        parts = [f"{len(independent)} of {len(self.verdicts)} {kind}"]
        parts += [f"{reported} reported"] if reported else []
        parts += [f"{conditional} on a reported condition"] if conditional else []
        return ", ".join(parts)

    @property
    def mark(self) -> str:
        """The cell's outcome with its qualifier: "pass (2 of 5 corroborated, 3 reported)"."""
        return f"{self.outcome} ({self.qualifier})" if self.qualifier else self.outcome

    @staticmethod
    def _weakest(verdicts: list[Verdict]) -> str:
        kinds: list[str] = [v.evidence.value for v in verdicts if v.evidence is not None]
        return min(kinds, key=lambda k: EVIDENCE_STRENGTH.get(k, -1)) if kinds else ""

    @property
    def lab_time_s(self) -> float | None:
        """Station-clock lab time of the tests behind the cell, when the records carry it."""
        times = [t["lab_time_s"] for t in self.tests.values() if isinstance(t.get("lab_time_s"), (int, float))]
        return sum(times) if times else None


@dataclass
class ClaimRow:
    claim: Claim
    cells: dict[str, Cell]  # phone -> cell

    @property
    def measured(self) -> bool:
        return any(c.verdicts for c in self.cells.values())


@dataclass
class ClaimsGrid:
    phones: list[str]
    rows: list[ClaimRow]
    unclaimed: int = 0  # verdicts that speak to no claim (identity, instrument checks): in the tables below

    def qualified_passes(self) -> list[str]:
        """Each passing cell that rests partly on the phone's word: "claim 14 on EMU0001 (2 of 5
        corroborated, 3 reported)" (what a profile with `reported_parts = "held"` stops a run on)."""
        return [f"claim {row.claim.number} on {phone} ({cell.qualifier})"
                for row in self.rows for phone, cell in row.cells.items() if cell.qualifier]


def claims_grid(data: dict[str, Any]) -> ClaimsGrid:
    """The claims x phones grid of a results.json-shaped record."""
    claims = load_claims()
    phones = list(data.get("duts") or {})
    for test in data.get("tests", []):
        if test.get("dut") and test["dut"] not in phones:
            phones.append(test["dut"])
    rows = {c.number: ClaimRow(c, {p: Cell(order=c.metrics) for p in phones}) for c in claims}
    unclaimed = 0
    for test in data.get("tests", []):
        phone = test.get("dut")
        for v in verdicts_of(test):
            number = claim_of(v, claims)
            if number not in rows or phone is None:
                unclaimed += 1
                continue
            cell = rows[number].cells[phone]
            cell.verdicts.append(v)
            cell.tests[test["nodeid"]] = test
    return ClaimsGrid(phones, list(rows.values()), unclaimed)


if __name__ == "__main__":
    print(claims_markdown(), end="")

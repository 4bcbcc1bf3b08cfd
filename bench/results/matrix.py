"""The microcode compatibility matrix: SoC × microcode build rows, built from every stored run.

Per row: the measured overflow rule and accumulator width, whether the fingerprint matched a
profile, the adapter, and the newest bit-exact / redundancy / latency / power / thermal verdicts,
with the run and date they were last verified. A unit whose fingerprint says "unknown",
"mismatch" or "inconsistent" gets a row of its own, highlighted, so it never hides in a good row.
`--against` an earlier matrix (CSV or Markdown from this command) or a date marks regressions
and new rows.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterable
from typing import Any, Protocol, cast

from phonebench.core.decoding import read_text
from phonebench.core.errors import BenchError
from phonebench.core.verdict import GOOD_OUTCOMES, severity_of

NOT_MEASURED = "not measured"
ANOMALIES = ("unknown", "mismatch", "inconsistent")
GOOD = GOOD_OUTCOMES
# Verdict columns: (column, exact names, name prefixes). The naming convention is in docs/results.md.
VERDICT_COLUMNS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("bit_exact", ("bit_exact_after_adapter", "tokens_differing_from_golden"), ()),  # the second: numerics suite
    ("redundancy", (), ("redundancy_",)),
    ("latency", (), ("voice_latency_", "token_", "first_token", "dialog_")),
    ("power", (), ("power_", "energy_", "sustained_power_")),  # the last: the default profile's metric
    ("thermal", (), ("cover_temp_", "back_cover_", "thermal_", "npu_trip")),
)
VERDICT_NAMES = frozenset(c[0] for c in VERDICT_COLUMNS)
# "fingerprint" is the documented name; the numerics suite's own name is accepted as well.
FINGERPRINT_NAMES = ("fingerprint", "npu_microcode_fingerprint")
FIELDS = ("soc", "microcode", "fingerprint", "rule", "width_bits", "profile", "adapter",
          *(c[0] for c in VERDICT_COLUMNS), "units", "last_run", "last_date")
HEADERS = {"soc": "SoC", "microcode": "Microcode", "fingerprint": "Fingerprint", "rule": "Overflow rule",
           "width_bits": "Width (bits)", "profile": "Profile match", "adapter": "Adapter",
           "bit_exact": "Bit-exact", "redundancy": "Redundancy", "latency": "Latency", "power": "Power",
           "thermal": "Thermal", "units": "Units", "last_run": "Last verified run", "last_date": "Last verified",
           "change": "Change"}


class MatrixError(BenchError):
    """An earlier matrix or a date given to --against cannot be used."""


@dataclass
class Cell:
    outcome: str = NOT_MEASURED
    run_id: str | None = None


@dataclass
class MatrixRow:
    soc: str
    microcode: str
    fingerprint: str = NOT_MEASURED  # known | unknown | mismatch | inconsistent | not measured
    rule: str = ""
    width_bits: str = ""
    profile: str = ""
    adapter: str = ""
    cells: dict[str, Cell] = field(default_factory=lambda: {c[0]: Cell() for c in VERDICT_COLUMNS})
    serials: set[str] = field(default_factory=set)
    last_run: str = ""
    last_date: str = ""
    change: str = ""  # filled by compare(): new, regression: ..., changed: ...
    was: dict[str, str] = field(default_factory=dict)  # column -> earlier value, where it changed

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.soc, self.microcode, self.anomaly)

    @property
    def anomaly(self) -> str:
        return self.fingerprint if self.fingerprint in ANOMALIES else ""

    @property
    def highlighted(self) -> bool:
        return bool(self.anomaly) or any(c.outcome not in GOOD + (NOT_MEASURED,) for c in self.cells.values())

    def values(self) -> dict[str, str]:
        out = {"soc": self.soc, "microcode": self.microcode, "fingerprint": self.fingerprint, "rule": self.rule,
               "width_bits": self.width_bits, "profile": self.profile, "adapter": self.adapter,
               "units": str(len(self.serials)), "last_run": self.last_run, "last_date": self.last_date}
        out.update({name: cell.outcome for name, cell in self.cells.items()})
        return out


@dataclass
class Matrix:
    rows: list[MatrixRow]
    runs: int  # runs that contributed
    against: str | None = None  # what it was compared with
    gone: list[tuple[str, str, str]] = field(default_factory=list)  # rows of the earlier matrix not seen now

    @property
    def regressions(self) -> list[MatrixRow]:
        return [r for r in self.rows if r.change.startswith("regression")]


def fingerprint_fields(extra: dict[str, Any], outcome: str) -> dict[str, Any]:
    """A fingerprint verdict's extra, in either documented shape: flat (soc, rule, width_bits,
    profile, ...) or as phonebench.bench.phone.fingerprint writes it (soc_model, measured {accumulator_bits, overflow})."""
    measured = extra.get("measured") or {}
    verdict = str(extra.get("verdict") or ("known" if outcome in GOOD else "mismatch"))
    width = extra.get("width_bits", measured.get("accumulator_bits"))
    if width is None and measured:
        width = "wide"  # nothing overflowed up to 32 bits
    profile = extra.get("profile") or (extra.get("microcode") if verdict == "known" else None)
    return {"verdict": verdict, "soc": extra.get("soc") or extra.get("soc_model"), "microcode": extra.get("microcode"),
            "rule": extra.get("rule") or measured.get("overflow"), "width_bits": width, "profile": profile,
            "adapter": extra.get("adapter")}


def column_of(name: str) -> str | None:
    for column, exact, prefixes in VERDICT_COLUMNS:
        if name in exact or name.startswith(prefixes):
            return column
    return None


@dataclass
class DutSighting:
    """One DUT in one run, for the matrix."""

    run_id: str
    started: dt.datetime | None
    dut: str
    serial: str | None
    soc: str
    microcode: str | None


@dataclass
class VerdictFact:
    """One matrix-relevant verdict of one DUT in one run."""

    run_id: str
    started: dt.datetime | None
    dut: str
    name: str
    outcome: str
    extra: dict[str, Any] = field(default_factory=dict)


class MatrixSource(Protocol):
    """The two reads the matrix needs from a results store. The store (bench/store/store.py's
    Store) sits above the results and answers them: the matrix names what it reads, never the store."""

    def dut_sightings(self, before: dt.datetime | None = None) -> list[DutSighting]: ...

    def verdict_facts(self, exact: Iterable[str], prefixes: Iterable[str],
                      before: dt.datetime | None = None) -> list[VerdictFact]: ...


def build_matrix(store: MatrixSource, before: dt.datetime | None = None) -> Matrix:
    """The matrix from every run in the store (started before `before`, if given)."""
    exact = {*FINGERPRINT_NAMES, *(n for c in VERDICT_COLUMNS for n in c[1])}
    prefixes = [p for c in VERDICT_COLUMNS for p in c[2]]
    sightings = store.dut_sightings(before)
    facts = store.verdict_facts(exact, prefixes, before)
    return assemble(sightings, facts)


def assemble(sightings: list[DutSighting], facts: list[VerdictFact]) -> Matrix:
    """Rows from DUT sightings and verdicts, both oldest run first: newer values overwrite."""
    by_run_dut: dict[tuple[str, str], list[VerdictFact]] = {}
    for fact in facts:
        by_run_dut.setdefault((fact.run_id, fact.dut), []).append(fact)
    rows: dict[tuple[str, str, str], MatrixRow] = {}
    last_anomaly: dict[tuple[str, str], str] = {}  # a run without a fingerprint inherits the last class
    runs = set()
    for sighting in sightings:
        found = by_run_dut.get((sighting.run_id, sighting.dut), [])
        soc, microcode = sighting.soc, sighting.microcode or "(none reported)"
        fingerprint = next((f for f in reversed(found) if f.name in FINGERPRINT_NAMES), None)
        fp = fingerprint_fields(fingerprint.extra, fingerprint.outcome) if fingerprint is not None else None
        if fp is not None:
            last_anomaly[(soc, microcode)] = fp["verdict"] if fp["verdict"] in ANOMALIES else ""
        anomaly = last_anomaly.get((soc, microcode), "")
        key = (soc, microcode, anomaly)
        row = rows.get(key)
        if row is None:
            row = rows[key] = MatrixRow(soc=soc, microcode=microcode, fingerprint=anomaly or NOT_MEASURED)
        if sighting.serial:
            row.serials.add(sighting.serial)
        if fp is not None:
            row.fingerprint = fp["verdict"]
            row.rule = _text(fp["rule"])
            row.width_bits = _text(fp["width_bits"])
            row.profile = _text(fp["profile"]) or "none"
            row.adapter = _text(fp["adapter"]) or "none"
        per_column: dict[str, str] = {}
        for fact in found:
            column = column_of(fact.name)
            if column is None:
                continue
            if severity_of(fact.outcome) >= severity_of(per_column.get(column, "info"), unknown=0):
                per_column[column] = fact.outcome
        for column, outcome in per_column.items():
            row.cells[column] = Cell(outcome, sighting.run_id)
        if found:
            runs.add(sighting.run_id)
            row.last_run = sighting.run_id
            row.last_date = sighting.started.date().isoformat() if sighting.started else ""
    ordered = sorted(rows.values(), key=lambda r: (r.soc, r.microcode, r.anomaly))
    return Matrix(rows=ordered, runs=len(runs))


def _text(value: object) -> str:
    return "" if value is None else str(value)


# --- comparing with an earlier matrix -------------------------------------------------------
def parse_date(text: str) -> dt.datetime | None:
    """A date or ISO date-time (as naive UTC), or None if `text` is not one."""
    try:
        stamp = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if stamp.tzinfo is not None:
        stamp = stamp.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return stamp


def load_matrix_file(path: Path) -> list[dict[str, str]]:
    """Rows of a matrix written by `bench matrix --format csv` or `--format md`."""
    if not path.exists():
        raise MatrixError(f"--against {path}: no such file, and not a date (YYYY-MM-DD)",
                          hint="give an earlier `bench matrix --format csv` output, or a date")
    text = read_text(path, "--against matrix", error=MatrixError,
                     hint="give an earlier `bench matrix --format csv` output, or a date")
    rows = _parse_markdown(text) if text.lstrip().startswith("|") or path.suffix == ".md" else _parse_csv(text, path)
    if not rows or not {"soc", "microcode", "fingerprint"} <= set(rows[0]):
        raise MatrixError(f"--against {path}: not a matrix written by `bench matrix` (CSV or Markdown)",
                          hint="HTML matrices cannot be compared; keep the CSV for that")
    return rows


def _parse_csv(text: str, path: Path) -> list[dict[str, str]]:
    reader = csv.DictReader(io.StringIO(text))
    rows: list[dict[str, str]] = []
    try:
        for row in reader:
            if None in row or None in row.values():  # more cells than the header, or fewer
                raise MatrixError(f"--against {path}:{reader.line_num}: {len(reader.fieldnames or [])} columns in "
                                  f"the header, a different number on this line",
                                  hint="give the CSV as `bench matrix --format csv` wrote it")
            cells = cast("dict[str, str]", row)  # neither a None key nor a None value: checked above
            rows.append({k: _csv_unguard(v) for k, v in cells.items()})
    except csv.Error as exc:
        raise MatrixError(f"--against {path}:{reader.line_num}: not CSV ({exc})",
                          hint="give the CSV as `bench matrix --format csv` wrote it") from None
    return rows


def _parse_markdown(text: str) -> list[dict[str, str]]:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("|")]
    if len(lines) < 2:
        return []
    by_header = {v: k for k, v in HEADERS.items()}
    header = [by_header.get(_md_cell(c), _md_cell(c)) for c in _md_split(lines[0])]
    rows = []
    for line in lines[2:]:
        cells = [_md_cell(c) for c in _md_split(line)]
        rows.append(dict(zip(header, cells)))
    return rows


def _md_split(line: str) -> list[str]:
    return re.split(r"(?<!\\)\|", line.strip().strip("|"))


def _md_cell(cell: str) -> str:
    text = cell.strip().replace("\\|", "|")
    text = re.sub(r"\s*\(was [^)]*\)$", "", text)  # our own regression marks
    return text.replace("**", "").removeprefix("⚠ ").strip()


def compare(current: Matrix, earlier: list[dict[str, str]], label: str) -> Matrix:
    """Mark each current row new, regressed (a verdict that passed no longer does, or a known
    fingerprint is no longer known) or changed (rule, width, profile, adapter); list rows gone."""
    old = {(r.get("soc", ""), r.get("microcode", ""), r.get("fingerprint", "") if r.get("fingerprint") in ANOMALIES
            else ""): r for r in earlier}
    for row in current.rows:
        before = old.pop(row.key, None)
        if before is None:
            row.change = "new"
            continue
        now = row.values()
        regressed, changed = [], []
        for column, *_ in VERDICT_COLUMNS:
            if before.get(column) in GOOD and now[column] not in GOOD + (NOT_MEASURED,):
                regressed.append(column)
                row.was[column] = before[column]
        if before.get("fingerprint") == "known" and now["fingerprint"] not in ("known", NOT_MEASURED):
            regressed.append("fingerprint")
            row.was["fingerprint"] = "known"
        for column in ("rule", "width_bits", "profile", "adapter"):
            if before.get(column) and now[column] and before[column] != now[column]:
                changed.append(column)
                row.was[column] = before[column]
        parts = []
        if regressed:
            parts.append("regression: " + ", ".join(regressed))
        if changed:
            parts.append("changed: " + ", ".join(changed))
        row.change = "; ".join(parts)
    current.gone = sorted(old)
    current.against = label
    return current


# --- output ---------------------------------------------------------------------------------
def _fields(matrix: Matrix) -> list[str]:
    return [*FIELDS, "change"] if matrix.against else list(FIELDS)


# A spreadsheet runs a cell that starts like a formula; device strings must never be code.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_guard(value: object) -> object:
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not _is_number(value):
        return "'" + value
    return value


def _csv_unguard(value: str) -> str:
    if value and value.startswith("'") and value[1:].startswith(_FORMULA_START):
        return value[1:]
    return value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def to_csv(matrix: Matrix) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=_fields(matrix), lineterminator="\n")
    writer.writeheader()
    for row in matrix.rows:
        values = {**row.values(), "change": row.change} if matrix.against else row.values()
        writer.writerow({k: _csv_guard(v) for k, v in values.items()})
    return buf.getvalue()


def to_markdown(matrix: Matrix) -> str:
    fields = _fields(matrix)
    lines = ["| " + " | ".join(HEADERS[f] for f in fields) + " |", "|" + "---|" * len(fields)]
    for row in matrix.rows:
        values = {**row.values(), "change": row.change}
        cells = []
        for f in fields:
            text = _md_escape(values[f])
            if f in row.was:
                text = f"**{text}** (was {_md_escape(row.was[f])})"
            elif f == "fingerprint" and row.anomaly:
                text = f"⚠ **{text}**"
            elif f in VERDICT_NAMES and values[f] not in GOOD + (NOT_MEASURED,):
                text = f"**{text}**"
            cells.append(text)
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(_footer(matrix))
    return "\n".join(lines) + "\n"


def _md_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _footer(matrix: Matrix) -> str:
    text = f"{len(matrix.rows)} rows from {matrix.runs} runs"
    if matrix.against:
        regressions = len(matrix.regressions)
        new = sum(r.change == "new" for r in matrix.rows)
        text += f"; against {matrix.against}: {regressions} regressed, {new} new, {len(matrix.gone)} gone"
        if matrix.gone:
            text += " (" + "; ".join(" / ".join(p for p in key if p) for key in matrix.gone) + ")"
    return text + "."


def to_html(matrix: Matrix) -> str:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("phonebench.bench.report", "templates"), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True)
    return env.get_template("matrix.html.j2").render(matrix=matrix, fields=_fields(matrix), headers=HEADERS,
                                                      verdict_columns=VERDICT_NAMES, good=GOOD,
                                                      not_measured=NOT_MEASURED, footer=_footer(matrix))


FORMATS = {"csv": to_csv, "md": to_markdown, "html": to_html}

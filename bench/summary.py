"""The readable end-of-run summary printed by `bench run`."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.core.verdict import GOOD_OUTCOMES, TestOutcome

OUTCOME_MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "skip"}


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def verdict_text(v: dict[str, Any]) -> str:
    limit = f" {v['comparator']} {_fmt(v['limit'])}" if v["limit"] is not None else ""
    bound = f" (bound {_fmt(v['bound'])} @ {v['confidence']})" if v.get("bound") is not None else ""
    n = f" n={v['n']}" if v.get("n") is not None else ""
    return f"{v['outcome']}: {v['name']} {v['statistic']} {_fmt(v['value'])} {v['unit']}{bound}{limit}{n}"


def summary_lines(data: dict[str, Any], quiet: bool = False) -> list[str]:
    lines = [f"run {data['run_id']} on station {data['station']['name']} ({data['status']})"]
    for name, ident in data["duts"].items():
        if "error" in ident:
            lines.append(f"  DUT {name} @ {ident.get('address')}: {ident['error'].splitlines()[0]}")
        else:
            lines.append(f"  DUT {name}: serial {ident.get('serial')} {ident.get('soc_manufacturer')} "
                         f"{ident.get('soc_model')} microcode {ident.get('microcode') or '-'}")
    for role, inst in data["instruments"].items():
        ident = inst.get("identity") or {}
        lines.append(f"  {role}: {ident.get('manufacturer', '?')} {ident.get('model', '?')} @ {inst['address']}")
    lines.append("")
    for test in data["tests"]:
        bad = TestOutcome(test["outcome"]).is_bad
        if quiet and not bad:
            continue
        mark = OUTCOME_MARK.get(test["outcome"], test["outcome"])
        lines.append(f"  {mark:5} {test['nodeid']}")
        for v in test["verdicts"]:
            if not quiet or v["outcome"] not in GOOD_OUTCOMES:
                lines.append(f"          {verdict_text(v)}")
        if (bad or test["outcome"] == "skipped") and test["message"]:
            lines.append(f"          {test['message'].splitlines()[0][:200]}")
    s = data["summary"]
    for problem in data.get("problems", []):
        lines.append(f"  problem: {problem.splitlines()[0][:300]}")
    lines.append("")
    lines.append(" ".join(f"{k}={s[k]}" for k in ("passed", "failed", "error", "skipped", "verdicts_failed") if k in s))
    return lines


def print_summary(data: dict[str, Any], results_path: Path, quiet: bool = False) -> None:
    print("\n".join(summary_lines(data, quiet)))
    print(f"results: {results_path}")

"""A production batch's summary page: every unit of a `bench line` batch with its outcome, the
reason in plain words, attempts, cycle time and overhead, linked to each unit's run report; the
line's figures on top. One offline HTML file, like the run report (no script, no URL)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from jinja2 import Environment, select_autoescape

from phonebench.core.files import write_atomically

_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>Line batch {{ batch }}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
.pass{background:#dfd}.fail{background:#fdd}.incomplete,.wrong-unit,.refused{background:#ffd}
</style></head><body>
<h1>Line batch {{ batch }}</h1>
<p>station {{ station }} · {{ figures.units }} units · PASS {{ figures.passed }} · FAIL {{ figures.failed }}
· other {{ figures.other }} · first-pass yield {{ '%.1f' % (100 * figures.first_pass_yield) }} %
· {{ '%.0f' % figures.units_per_hour }} units/hour · bench overhead {{ '%.2f' % figures.overhead_mean_s }} s/unit
(max {{ '%.2f' % figures.overhead_max_s }} s)</p>
<table><tr><th>#</th><th>Serial</th><th>Outcome</th><th>Why</th><th>Attempts</th><th>Cycle s</th>
<th>Overhead s</th><th>Expected</th><th>Report</th></tr>
{% for u in units %}<tr class="{{ u.outcome }}"><td>{{ loop.index }}</td><td>{{ u.serial }}</td>
<td>{{ u.outcome | upper }}</td><td>{{ u.reason or '' }}</td><td>{{ u.attempts }}</td>
<td>{{ '%.2f' % u.cycle_s }}</td><td>{{ '%.2f' % u.overhead_s if u.overhead_s is not none else '' }}</td>
<td>{{ u.expected }}</td><td>{% if u.report %}<a href="{{ u.report }}">{{ u.run_id }}</a>{% endif %}</td></tr>
{% endfor %}</table></body></html>
"""


def render_line(path: Path, batch: str, station: str, units: list[dict[str, Any]], figures: dict[str, Any]) -> Path:
    """Write the batch page; unit reports are linked relative to it."""
    env = Environment(autoescape=select_autoescape(default=True))
    rows = []
    for unit in units:
        report = unit.get("report")
        rows.append({**unit, "report": os.path.relpath(report, path.parent) if report else None})
    html = env.from_string(_TEMPLATE).render(batch=batch, station=station, units=rows, figures=figures)
    write_atomically(path, html)
    return path

"""HTML reports: one self-contained report.html per run, with inline SVG plots."""
from .render import ReportError, render_data, render_html, render_run

__all__ = ["ReportError", "render_data", "render_html", "render_run"]

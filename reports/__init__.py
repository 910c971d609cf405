"""Reports over the pydantic Grade: terminal text, HTML, Markdown, JSON, JUnit XML, Gradescope
results.json and CSV for one grade (`render`), and the class report for a batch
(`reports.class_report.render_class_html`, `render_class_csv`). English and zh-TW."""

from reports.render import FORMATS, render

__all__ = ["FORMATS", "render"]

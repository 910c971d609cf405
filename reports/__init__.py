"""Renderers over the pydantic Grade: text for terminals, JSON for machines."""
from reports.render import render

__all__ = ["render"]

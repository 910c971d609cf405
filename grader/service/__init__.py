"""The grading server: its HTTP API, its pages, and what they share (DESIGN.md, principle 7)."""

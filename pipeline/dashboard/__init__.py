"""Build the static compatibility dashboard from stage reports (reports.py: the report format)."""

"""The stage report: its model (model.py), the only thing the dashboard reads, and its files (files.py)."""

"""Verdicts over asv's stored results: compare, the regressions listing, export, bisect."""

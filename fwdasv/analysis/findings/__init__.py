"""Findings: the stored results read as series, judged by the rules, recorded with their verdicts."""

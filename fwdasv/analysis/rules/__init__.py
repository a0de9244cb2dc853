"""The pure decisions: where a series steps, how noisy it is, what a re-measure says, which status follows.

Functions over numbers (numpy arrays, floats, frozen values) with no files, no asv and no
processes: they import only the standard library, numpy and `fwdasv.core`
(tests/analysis/rules/test_purity.py holds that). The method and its figures: docs/verdicts.md.
"""

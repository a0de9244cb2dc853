"""Confirmation re-measures: a finding's pair measured as an interleaved A/B on this machine."""

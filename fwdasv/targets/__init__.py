"""Targets fwdasv's engine can time (see `fwdasv.targets.base`)."""

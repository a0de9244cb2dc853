"""fwdasv's asv layer: the suite base classes asv runs, asv projects and commands, the
scaffolding of a new project, linking per-commit environments, the published site, and
the results tree read back as records."""

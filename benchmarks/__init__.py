"""asv suites of fwdasv (see fwdasv.asvsuite); asv needs this package marker."""

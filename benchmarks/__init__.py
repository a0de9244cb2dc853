"""asv suites of fwdasv (see fwdasv.asv.suite); asv needs this package marker."""

"""`fwdasv demo`: the demo model repository and the run over its history."""

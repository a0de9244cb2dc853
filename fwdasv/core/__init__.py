"""The values every part of fwdasv shares: cases, the bench-JSON schema, latency statistics,
tables, safe file writing and the errors a user can cause. Nothing here imports torch."""

"""A range measured over the GPUs of a Ray cluster (`fwdasv shard --ray`), and the
re-measures of a finding run on the GPU that measured it.

ledger: the pure queue and record (who measured what, what was re-run); workspace: a
node's copy of the project (the repository from a git bundle, environments built there);
tether: an asv run that dies with its worker; actor: the Ray side of a node; run: the
head's loop; remote: confirm, explain and bisect pinned to a finding's node and GPU;
night: a night over the cluster (measure, triage, publish, gate); shard_cli: `fwdasv
shard`, a range over this host's GPUs or (--ray) the cluster's.
"""

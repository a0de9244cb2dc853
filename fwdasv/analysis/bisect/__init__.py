"""Find the commit that made one benchmark case slower, measuring with asv as it goes.

`fwdasv bisect` drives `asv run` itself, one run per probe on the first-parent line
GOOD..BAD, on an asv-managed environment that installs every commit (`environment`:
an existing one is refused), and decides every step on the samples, by process
medians for a fwdasv suite (`rules`, pure). `search` is where a bisection stands (a
pure value), `series` the benchmark case it follows and its stored samples, `driver`
opens and runs one (`Bisector`, over a `session`) through its steps (`ends`, `probes`,
`final_pair`), `outcome` the answer (`BisectResult`). A commit is named only
when the final pair differs significantly. The rule table, with its figures:
docs/verdicts.md ("bisect").
"""

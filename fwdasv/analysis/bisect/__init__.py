"""Find the commit that made one benchmark case slower, measuring with asv as it goes.

`asv find` bisects on medians alone and assumes one clean step; on noisy
timings it follows noise, and on an `existing` environment (or `--python=same`)
it measures the one installed build for every commit and saves those numbers
under each hash. `fwdasv bisect` drives `asv run` itself, one commit per run,
on an asv-managed environment (virtualenv, uv, conda, rattler: asv installs the
project at each commit), and decides every step on the samples.

The rule. GOOD and BAD must differ first: Mann-Whitney p < alpha with a median
ratio beyond `factor` (the *direction* of the step, slower or faster, is taken
from them; both are re-measured up to `max_remeasure` times before giving up).
A probe M between them is compared with both ends, each comparison one of

    different  the median moved beyond `factor` in the step's direction, and p < alpha
    same       the median did not move beyond `factor` in that direction
    unknown    it moved beyond `factor` but p >= alpha (asv compare's `~`), or too
               few samples to test at all (fwdasv.core.stats.is_different gives None)

and then

    GOOD->M different, M->BAD same       M is bad (the step is at or before M)
    GOOD->M same,      M->BAD different  M is good (the step is after M)
    GOOD->M different, M->BAD different  M is part way: GOOD, M and BAD are measured
                                         again (the ends may have been measured in
                                         another machine state), then it is placed again
    anything else                        unknown: measure M again (asv --append-samples)

After `max_remeasure` extra runs a probe still unknown (or part way) is decided
by the closer median (in log ratio) and the result is marked uncertain. The
probes halve the first-parent range, so a range of N commits needs about
ceil(log2 N) asv runs, plus re-measures; stored results with enough samples are
reused, not re-run. A probe whose benchmark fails is skipped (the next
candidate nearest the middle is taken), as `asv find` shifts past failed
commits.

Process-level variation. For a fwdasv suite (its `samples` per bench process
known, `fwdasv.analysis.remeasure.process_layout`) every comparison, the ends,
each probe and the final pair, is on process medians
(`fwdasv.analysis.judgment.process_test`: a t rule against the variance between
the processes of one commit, pooled over every commit the bisection read), as
confirm judges, and with 5 or more processes a side by their ranks too
(`judgment.process_rank_test`: one process that ran fast moves one rank, where
it widens the pooled spread); the ends, which only gate the search, on a
spread that leaves out a well-measured commit's odd processes. Mann-Whitney
on samples counted one process's samples as independent runs (a bad commit
whose one run read fast became "+15.1%, p=1.1e-07" at the wrong commit). A side's level is the median of its process
medians (one run that read fast among three does not move it). One run is
never enough: GOOD and BAD from one run get a second before they are judged,
and a probe decided from one asv run is uncertain until a re-measure agrees:
it is measured again, with GOOD and BAD in the same run (one window of load),
until the newest run alone and all its runs give the same verdict (else, after
`max_remeasure` runs, it is marked `unconfirmed` and the result uncertain).
Other benchmarks keep asv's sample rule.

The answer is named only when the final pair (the last good and the first bad
commit) differs significantly; judged by processes, the pair is then measured
once more in one run, and a pair that does not move there counts as not
differing. When it does not, the decisions that led there
are re-checked, nearest the pair first, each once (one more run, placed again
on all its samples); a decision that changes reopens the search between the new
bounds. Only when none is left does bisect say "not reproducible" and name no
commit: under load a probe can be put on the wrong side, and the final pair is
where that shows.

Bisect's runs are stored in a results dir of their own
(`fwdasv.asv.history.remeasure_results_dir`, beside the history's), read back
with the history's samples: appended to the history, re-measures from a quieter
window moved a commit's stored median from 39.5 to 19.3 ms and made a finding.
"""

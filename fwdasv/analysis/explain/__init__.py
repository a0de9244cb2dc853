"""What got slower: a confirmed step's two commits profiled, and their kernels (or ops) diffed."""

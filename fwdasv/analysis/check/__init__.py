"""The pull-request check: BASE and HEAD measured interleaved, every case; no stored results
needed (a series' stored noise is its prior where there is one)."""

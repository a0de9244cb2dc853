"""The pull-request check: BASE and HEAD measured interleaved, every case, from no stored results."""

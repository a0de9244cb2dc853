"""Two commits compared on their samples: the rule, the stored results, the table."""

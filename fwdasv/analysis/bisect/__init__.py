"""`fwdasv bisect`: the first commit where one benchmark case changed, measured with asv."""

"""`python -m fwdasv ...`: the `fwdasv` command."""

from fwdasv.cli import main

if __name__ == "__main__":
    main(prog_name="fwdasv")

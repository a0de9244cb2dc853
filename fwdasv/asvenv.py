"""`python -m fwdasv.asvenv link {env_dir}`: the stable name written into asv configurations.

The code lives in `fwdasv.asv.envlink`.
"""

from fwdasv.asv.envlink import PTH_NAME, link, main  # noqa: F401

if __name__ == "__main__":
    main()

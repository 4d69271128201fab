"""`python -m think ...`: the same command line as the `think` script."""

from think.cli import main

if __name__ == "__main__":
    raise SystemExit(main())

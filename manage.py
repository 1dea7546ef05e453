#!/usr/bin/env python
import sys


def main() -> None:
    from virgo.startup import run_management

    run_management("manage.py", sys.argv[1:])


if __name__ == "__main__":
    main()

"""`python -m app.cli`: the `threadline` command."""

from app.cli import main

main()

"""python -m app runs the pgsched CLI."""

from app.cli import main

main()

"""``python -m librarian``."""

from librarian.cli import main

main()

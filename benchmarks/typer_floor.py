"""The CLI layer's own floor (``bench_parallel.py --cases startup``): a typer app that parses a local pull's
command line into a command that does nothing. typer 0.2x imports pydantic to coerce every option that is
not a bare flag, so this is what any librarian command pays before its own work."""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer()
Opt = Annotated[str | None, typer.Option()]


@app.callback()
def main(quiet: Annotated[bool, typer.Option("-q")] = False) -> None: ...


@app.command()
def pull(
    package: str,
    repo: Opt = None,
    sm: Opt = None,
    cuda: Opt = None,
    torch: Opt = None,
    python: Opt = None,
    platform: Opt = None,
    output: Annotated[str | None, typer.Option("-o")] = None,
) -> None: ...


if __name__ == "__main__":
    app()

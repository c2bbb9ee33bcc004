"""What the help says a value is: a word or an example (``--torch 2.9``, ``--sm 89``, ``PACKAGE...``), not
typer's type placeholders (``<str>``, ``<list[str]>``).

Applied to every command when it is loaded (:mod:`librarian.cli.lazy`), so a new option gets a word by
its name without one more keyword at each declaration.
"""

from __future__ import annotations

from typing import Any

# Options by their long name (or short, where they have none): the word help shows after them.
OPTION_WORDS = {
    "--sm": "89", "--torch": "2.9", "--cuda": "12.8", "--driver": "12.8", "--glibc": "2.31",
    "--python": "3.12|PATH", "--platform": "PLATFORM", "--repo": "DIR|URL", "--out": "DIR", "-o": "DIR",
    "--requirements": "FILE", "--manifest": "FILE", "--gpu": "N", "--jobs": "N", "-j": "N", "--preset": "NAME",
    "--cpu": "x86_64|aarch64", "--os": "linux|windows|macos", "--label": "cu128torch2.9", "--keep-torch": "N",
    "--keep-torch-from": "store|matrix", "--drop-torch": "2.4", "--keep-versions": "K", "--older-than": "DAYS",
    "--purge-grace": "HOURS", "--newest": "N", "--from": "URL|FILE", "--sm-from": "store", "--html": "FILE",
}  # fmt: skip
# Arguments by their parameter name: the word in the usage line and the help.
ARGUMENT_WORDS = {
    "packages": "PACKAGE",
    "wheels": "WHEEL",
    "paths": "PATH",
    "specs": "NAME==VERSION",
    "files": "FILE",
    "path": "PATH",
}


# Values the shell completes, by option or argument name (librarian.cli.completion).
COMPLETIONS = {
    "--sm": "sm_values",
    "--torch": "torch_values",
    "--cuda": "cuda_values",
    "--drop-torch": "torch_values",
    "--preset": "preset_values",
    "packages": "package_values",
}


def _completer(name: str) -> Any:
    def complete(ctx: Any, param: Any, incomplete: str) -> list[str]:
        # Imported on first completion only: help and commands do not pay for the matrix or the GPU list.
        from librarian.cli import completion

        found: list[str] = getattr(completion, name)(ctx, param, incomplete)
        return found

    return complete


def _is_argument(param: Any) -> bool:
    return getattr(param, "param_type_name", "") == "argument"


def _word(param: Any) -> str:
    if _is_argument(param):  # the usage line adds "..." where it takes several
        return ARGUMENT_WORDS.get(param.name or "", (param.name or "value").upper())
    names = [*param.opts, *param.secondary_opts]
    long = next((n for n in names if n.startswith("--")), names[0])
    return next((OPTION_WORDS[n] for n in (long, *names) if n in OPTION_WORDS), long.lstrip("-").upper())


def with_words(command: Any) -> Any:
    """``command`` (and its subcommands) with a word for every value its help shows."""
    param: Any
    for param in command.params:
        names = [param.name, *getattr(param, "opts", ()), *getattr(param, "secondary_opts", ())]
        if (which := next((COMPLETIONS[n] for n in names if n in COMPLETIONS), None)) is not None:
            param._custom_shell_complete = _completer(which)
        if getattr(param, "is_flag", False) or getattr(param, "count", False) or param.metavar is not None:
            continue
        param.metavar = _word(param)
        if _is_argument(param):
            # typer prints a type placeholder beside an argument's name whatever its metavar: none here.
            param.display_type_rich = lambda ctx: None
    for sub in getattr(command, "commands", {}).values():
        with_words(sub)
    return command

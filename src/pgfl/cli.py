"""The ``pgfl`` command: run experiments, reproduce the papers, benchmark the engine.

Exit codes: 0 success; 2 bad input, told in one line ``error: ...`` naming the setting or
file, its allowed range or problem and the value given (a :class:`ConfigError`, its
:class:`~pgfl.files.FileError`, or a usage error), with nothing written; 1 an internal
error (a bug: one line with a hint to report it; the traceback with ``pgfl --debug`` or
``PGFL_DEBUG=1``) or a run stopped by its backend (``run stopped: ...``, e.g. a Ray worker
lost for good; the finished work is saved and ``--resume`` continues); 130 interrupted
(Ctrl-C keeps every finished curve on disk; ``--resume`` continues). An exception raised
by the user's own code (a ``model.source`` file) is the user's, not a bug in pgfl: one line
naming the file, the exception and the line in the file (a
:class:`~pgfl.validation.UserCodeError`), exit code 1, since it may come in the middle
of a run, after files were written (the traceback with ``--debug``). Warnings are one
line ``warning: ...``. The commands themselves are in :mod:`pgfl.commands`.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import traceback
import warnings
from typing import Annotated, Any

import typer

from pgfl.commands import deploy, experiments
from pgfl.commands.common import state
from pgfl.commands.graphlearn import app as graphlearn_app
from pgfl.commands.privacy import app as privacy_app
from pgfl.validation import ConfigError, UserCodeError

app = typer.Typer(
    name="pgfl",
    help="Privacy-preserving graph federated learning: simulate, reproduce, benchmark.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command()(experiments.run)
app.command()(experiments.reproduce)
app.command()(experiments.bench)
app.command()(deploy.deploy)
app.add_typer(privacy_app, name="privacy")
app.add_typer(graphlearn_app, name="graphlearn")


def _usage_errors() -> tuple[type[BaseException], ...]:
    """The command line's usage errors: typer's own, or click's under an older typer.

    Newer typer bundles its own click (``typer.TyperException``); the extra
    ``pgfl[deploy]`` installs Flower 1.42, which pins typer < 0.21, whose usage errors are
    click's ``ClickException``.
    """
    own = getattr(typer, "TyperException", None)
    if own is not None:
        return (own,)
    import click  # lazy: only an older typer, which depends on click

    return (click.ClickException,)


_USAGE_ERRORS = _usage_errors()

#: Environment variable that, set to anything but "" or "0", shows internal tracebacks.
DEBUG_ENV = "PGFL_DEBUG"


@app.callback()
def _options(
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", help=f"Show the traceback of an internal error (or {DEBUG_ENV}=1)."
        ),
    ] = False,
) -> None:
    state["debug"] = debug


def _debugging() -> bool:
    return state["debug"] or os.environ.get(DEBUG_ENV, "") not in ("", "0")


def _usage_message(exc: Exception) -> str:
    """A usage error's message; a value that failed to parse is echoed (``got 'abc'``)."""
    message = exc.format_message()  # type: ignore[attr-defined]
    cause = exc.__cause__
    if cause is not None and hasattr(cause, "errors"):  # pydantic's ValidationError
        errors = cause.errors()
        if errors and "input" in errors[0]:
            message = f"{message.rstrip('.')}; got {errors[0]['input']!r}"
    return message


def _elsewhere(exc: Exception) -> str:
    """`` Did you mean 'pgfl privacy audit'?`` for a command of another group.

    The framework suggests the close names of the group the command was typed in; a
    command that lives in another group (``pgfl audit`` for ``pgfl privacy audit``) is
    found here, exactly or by a close name.
    """
    message = exc.format_message()  # type: ignore[attr-defined]
    ctx = getattr(exc, "ctx", None)
    found = re.match(r"No such command '(.+)'\.", message)
    if not found or "Did you mean" in message or ctx is None:
        return ""
    name = found.group(1)
    root = ctx.find_root()
    paths: dict[str, list[str]] = {}  # command name -> full commands that end with it

    def walk(group: Any, path: str) -> None:
        for sub, command in getattr(group, "commands", {}).items():
            full = f"{path} {sub}"
            if full != f"{ctx.command_path} {sub}":
                paths.setdefault(sub, []).append(full)
            walk(command, full)

    walk(root.command, root.info_name or "pgfl")
    matches = paths.get(name) or [
        p for close in difflib.get_close_matches(name, paths, n=1) for p in paths[close]
    ]
    return f" Did you mean {' or '.join(repr(m) for m in matches)}?" if matches else ""


def _fail(code: int, message: str) -> SystemExit:
    print("error: " + " ".join(message.split()), file=sys.stderr)
    return SystemExit(code)


def _exit_for(exc: BaseException) -> SystemExit:
    """The exit (code, one line on stderr) for an exception escaping a command."""
    if isinstance(exc, typer.Exit):
        return SystemExit(exc.exit_code)
    if isinstance(exc, typer.Abort) and isinstance(exc.__cause__, Exception):
        exc = exc.__cause__  # the framework turns an EOFError into Abort: not an interrupt
    elif isinstance(exc, (typer.Abort, KeyboardInterrupt)):
        print("interrupted", file=sys.stderr)
        return SystemExit(130)
    if isinstance(exc, ConfigError):
        return _fail(2, str(exc) or type(exc).__name__)
    if isinstance(exc, _USAGE_ERRORS):  # click's usage errors: exit 2
        message = _usage_message(exc) + _elsewhere(exc)
        if not message.strip():  # no arguments: the help was shown
            return SystemExit(2)
        return _fail(2, message)
    local = sys.modules.get("pgfl.backends.local")  # only a run that started can stop
    if local is not None and isinstance(exc, local.RunStopped):  # --resume continues
        return _fail(1, f"run stopped: {exc}")
    if _debugging():
        traceback.print_exception(exc, file=sys.stderr)
        hint = ""
    else:
        hint = f" (rerun as 'pgfl --debug ...' or with {DEBUG_ENV}=1 for the traceback)"
    if isinstance(exc, UserCodeError):  # the user's model file raised: not pgfl's bug
        return _fail(1, str(exc))
    if isinstance(exc, MemoryError):
        return _fail(1, f"out of memory: {exc}{hint}")
    if isinstance(exc, OSError):
        return _fail(1, f"{exc}{hint}")
    return _fail(
        1,
        f"internal error: {type(exc).__name__}: {exc}. This is a bug in pgfl; please report "
        f"it with the command you ran{hint}",
    )


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app and turn what escapes it into an exit code (module doc)."""
    state.update(debug=False, told_interrupt=False)
    with warnings.catch_warnings():
        full = warnings.showwarning

        def one_line(message, category, filename, lineno, file=None, line=None) -> None:
            if _debugging():
                full(message, category, filename, lineno, file, line)
            else:
                print("warning: " + " ".join(str(message).split()), file=sys.stderr)

        warnings.showwarning = one_line
        try:
            code = app(args=argv, standalone_mode=False, prog_name="pgfl")
        except (Exception, KeyboardInterrupt) as exc:
            raise _exit_for(exc) from None
    if code == 130 and not state["told_interrupt"]:  # Ctrl-C, which the framework swallows
        print("interrupted", file=sys.stderr)
    if isinstance(code, int) and code:
        raise SystemExit(code)


if __name__ == "__main__":  # pragma: no cover
    main()

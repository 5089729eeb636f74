"""What the commands share: how a bad input ends (exit 2) and an interruption (exit 130), and the parsing of
option values several commands take."""

from __future__ import annotations

import os
import signal
import sys
from typing import NoReturn

from .errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, ConfigError
from .term import console as make_console


def fail_bad_input(exc: ConfigError) -> None:
    make_console(stderr=True).print(f"error: {exc.render()}", soft_wrap=True)
    sys.exit(EXIT_BAD_INPUT)


def split_list(value: str | None) -> list[str] | None:
    if not value:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def parse_cpus(value: str | None, option: str) -> list[int] | None:
    if value is None:
        return None
    cpus: list[int] = []
    try:
        for part in value.split(","):
            if "-" in part:
                low, high = part.split("-", 1)
                cpus += list(range(int(low), int(high) + 1))
            else:
                cpus.append(int(part))
    except ValueError:
        raise ConfigError(f"{value!r} is not a CPU list (e.g. 0, 0,2 or 2-5)", path=option) from None
    return cpus


# True when `main` runs as this process's program (`program`), not in-process (click's CliRunner in tests).
_as_program = False


def set_as_program() -> None:
    """`main` runs as this process's program (cli.program): an interrupted command may end the process itself."""
    global _as_program
    _as_program = True


def ignore_stop_signals(previous: dict) -> dict:
    """Already stopping: a further Ctrl-C/SIGTERM must not cut the clean-up or the exit short (it killed the process
    by the signal between the clean-up and exit 130, seen when a second Ctrl-C landed after the last message).
    Returns the handlers the caller's `finally` restores: none as the `netarena` program (the signals stay ignored
    until the process ends), the caller's own when called in-process (click's CliRunner)."""
    for sig in previous:
        signal.signal(sig, signal.SIG_IGN)
    return {} if _as_program else previous


def exit_interrupted() -> NoReturn:
    """Everything is stopped, stored and said: exit 130.

    As the program the process ends here, by os._exit: through sys.exit, a second Ctrl-C that came as the clean-up
    finished ended the process by SIGINT during the interpreter's own exit in about 1 run of 6, although SIGINT was
    ignored then (/proc showed it; where in the exit was not found); with os._exit, 0 of 30 (tests/test_run_real.py,
    a Ctrl-C after the clean-up). atexit handlers do not run on this path; netarena registers none."""
    if not _as_program:
        sys.exit(EXIT_INTERRUPTED)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)

"""The ``dplab`` command line: what the Snakemake rules and users call.

Each subcommand lives in a module of :mod:`dplab.commands` (named in :data:`COMMANDS`) that
defines ``register(subparsers)`` (adds its parser, with ``set_defaults(func=...)``) and imports
heavy modules (torch, dp_accounting, matplotlib) only inside its ``func``, so that ``dplab``
starts fast.

Exit codes (:data:`EXIT_CODES`, printed by ``dplab --help``; docs/reliability.md): 0 every output
written whole; 2 bad input of any kind (a usage error, a flag given twice, a
:class:`~dplab.errors.DPLabError`); 3 a valid run that failed (a :class:`~dplab.errors.RunFailed`
such as training diverging to NaN/inf, an ``OSError`` such as a full disk, a ``MemoryError``);
1 an internal error (a bug); 141 the reader of the printed report closed it (``| head``), with
nothing on stderr.  Every failure is one line on stderr and leaves no output behind;
``dplab --debug COMMAND …`` also prints the traceback.
Long jobs log their progress on stderr (:mod:`dplab.progress`).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from dplab import __version__
from dplab.errors import DPLabError, RunFailed
from dplab.progress import setup_logging
from dplab.registry import Registry

#: subcommand module -> its ``register``, in the order ``dplab --help`` lists them
COMMANDS = Registry(
    "command",
    {
        "data": "dplab.commands.data:register",
        "train": "dplab.commands.train:register",
        "accounting": "dplab.commands.accounting:register",
        "sweep": "dplab.commands.sweep:register",
        "figures": "dplab.commands.figures:register",
        "mf": "dplab.commands.mf:register",
        "audit": "dplab.commands.audit:register",
        "provenance": "dplab.commands.provenance:register",
        "check": "dplab.commands.check:register",
        "dvc": "dplab.commands.dvc:register",
    },
)


#: exit codes (README, Command line); an interrupt (Ctrl-C) exits with 130, as shells do
BAD_INPUT, RUN_FAILED, INTERNAL_ERROR, INTERRUPTED, CLOSED_PIPE = 2, 3, 1, 130, 141
#: what each exit code means, as `dplab --help` prints it
EXIT_CODES = f"""exit codes:
  0    done: every output written whole
  {BAD_INPUT}    bad input (usage, a flag, a config key, an input file, an output path): \
one line names it
  {RUN_FAILED}    valid input, but the run failed: training diverged to NaN/inf, a write failed \
(full disk), out of memory
  {INTERNAL_ERROR}    internal error (a bug): `dplab --debug COMMAND ...` shows where
  {INTERRUPTED}  interrupted (Ctrl-C)
  {CLOSED_PIPE}  the reader of the printed report closed it (`dplab accountants | head`)
every failure prints one line on stderr and leaves no output behind (docs/reliability.md)"""


#: the actions that store one value: a second occurrence of their flag is refused (``append``,
#: ``extend`` and ``count`` are made to be repeated; ``help`` and ``version`` exit at once)
ONCE_ACTIONS = (None, "store", "store_const", "store_true", "store_false")


class _Parser(argparse.ArgumentParser):
    """argparse with exit code 2 and one line for usage errors (argparse's own convention), and
    a flag given twice refused (argparse would silently keep the last value): each action of
    :data:`ONCE_ACTIONS` is registered (``ArgumentParser.register``) as its class refusing a second
    occurrence, for this parser and its argument groups."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in ONCE_ACTIONS:
            self.register("action", name, _once(_standard_action(name)))

    def error(self, message: str) -> None:  # pragma: no cover - exercised through main()
        self.exit(BAD_INPUT, f"{self.prog}: error: {message}\n")

    def parse_known_args(self, args=None, namespace=None):
        self.given: set[str] = set()
        return super().parse_known_args(args, namespace)


def _standard_action(name: str | None) -> type[argparse.Action]:
    """argparse's own class for ``action=name``: the class of a flag added with it."""
    return type(argparse.ArgumentParser(add_help=False).add_argument("--flag", action=name))


def _once(action_class: type[argparse.Action]) -> type[argparse.Action]:
    """``action_class`` refusing a second occurrence of its flag on one command line."""

    class Once(action_class):
        def __call__(self, parser, namespace, values, option_string=None):
            if self.option_strings and self.dest in parser.given:
                parser.error(f"{'/'.join(self.option_strings)} given twice; give it once")
            parser.given.add(self.dest)
            super().__call__(parser, namespace, values, option_string)

    return Once


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dplab",
        description="Privacy analysis of DP-SGD: data, private training, accountants, figures.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dplab {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="on any failure also print the traceback"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS:
        COMMANDS[name](sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging()
    try:
        result = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
    except BrokenPipeError:  # the reader wants no more (`| head`): nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return CLOSED_PIPE
    except DPLabError as err:
        return _fail(args, BAD_INPUT, str(err))
    except RunFailed as err:
        return _fail(args, RUN_FAILED, str(err))
    except (OSError, MemoryError) as err:
        return _fail(args, RUN_FAILED, f"{type(err).__name__}: {err}")
    except Exception as err:  # a bug: one line, the traceback with --debug
        return _fail(
            args,
            INTERNAL_ERROR,
            f"internal error ({type(err).__name__}: {err}); "
            "`dplab --debug …` shows where; please report it",
        )
    except KeyboardInterrupt:
        return _fail(args, INTERRUPTED, "interrupted")
    return int(result or 0)


def _fail(args: argparse.Namespace, code: int, message: str) -> int:
    if args.debug:
        traceback.print_exc()
    one_line = " ".join(part.strip() for part in message.splitlines() if part.strip())
    print(f"dplab {args.command}: error: {one_line}", file=sys.stderr)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

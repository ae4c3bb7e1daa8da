"""A small stand-in for :mod:`argparse` on the path of the commands a running daemon serves.

Importing :mod:`argparse` (with :mod:`gettext`, :mod:`locale` and :mod:`warnings`) and
building a parser cost a served command several milliseconds, a quarter of what it costs
beyond the interpreter's start. The served commands' arguments are one table
(:data:`~opencode_memoryd.cli.commands.SERVED`), which
:func:`~opencode_memoryd.cli.commands.declare` renders with the same ``add_argument`` and
``add_mutually_exclusive_group`` calls into the full parser and into a
:class:`QuickParser`. This one parses the plain cases the way :mod:`argparse` would; for
anything else it raises :class:`Unsure` and the command takes the full way (the real
parser), which parses or reports it as always: an unknown or abbreviated option, ``--``, a
value that starts with ``-``, a missing or extra argument, two options of one exclusive
group, a value its ``type`` or ``choices`` refuse, an ``add_argument`` feature it does not
know (``nargs``, other actions).
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

#: The ``add_argument`` keywords understood; any other makes the parser :class:`Unsure`.
_KNOWN = frozenset({"action", "type", "default", "metavar", "help", "dest", "choices",
                    "required"})


class Unsure(Exception):
    """The quick parser cannot tell what :mod:`argparse` would do: take the full way."""


class Namespace:
    """The parsed arguments as attributes, like :class:`argparse.Namespace`."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def __repr__(self) -> str:
        return f"Namespace({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"


class _Arg:
    """One argument: where its value goes and how it is read."""

    def __init__(self, names: Sequence[str], kwargs: dict[str, Any], group: _Group | None
                 ) -> None:
        if not names or set(kwargs) - _KNOWN:
            raise Unsure(f"add_argument{tuple(names)} with {sorted(set(kwargs) - _KNOWN)}")
        self.positional = not names[0].startswith("-")
        if self.positional and len(names) > 1:
            raise Unsure(f"positional argument with several names {names}")
        action = kwargs.get("action")
        if action not in (None, "store", "store_true"):
            raise Unsure(f"action {action!r}")
        self.flag = action == "store_true"
        self.names = tuple(names)
        long_names = [n for n in names if n.startswith("--")]
        dest = kwargs.get("dest") or (names[0] if self.positional
                                      else (long_names or names)[0].lstrip("-"))
        self.dest: str = dest.replace("-", "_")
        self.type: Callable[[str], Any] | None = kwargs.get("type")
        self.choices = kwargs.get("choices")
        self.required = bool(kwargs.get("required")) or self.positional
        default = kwargs.get("default", False if self.flag else None)
        if isinstance(default, str) and self.type is not None:
            default = self.convert(default)  # as argparse does with a string default
        self.default = default
        self.group = group

    def convert(self, text: str) -> Any:
        """``text`` through the argument's ``type`` and ``choices``.

        Raises:
            Unsure: refused (the real parser says why).
        """
        try:
            value = self.type(text) if self.type is not None else text
        except (TypeError, ValueError) as exc:
            raise Unsure(str(exc)) from None
        if self.choices is not None and value not in self.choices:
            raise Unsure(f"{value!r} not among the choices")
        return value


class _Group:
    """A mutually exclusive group: at most one of its options given (one when required)."""

    def __init__(self, parser: QuickParser, required: bool) -> None:
        self.parser = parser
        self.required = required

    def add_argument(self, *names: str, **kwargs: Any) -> None:
        """As :meth:`QuickParser.add_argument`, in this group."""
        self.parser.add(names, kwargs, self)


class QuickParser:
    """Records one command's arguments and parses the plain cases (see the module).

    Takes and ignores the keywords of :class:`argparse.ArgumentParser` (``help``,
    ``description``, ``epilog``, ``formatter_class``): it never prints help.
    """

    def __init__(self, **_kwargs: Any) -> None:
        self._args: list[_Arg] = []
        self._groups: list[_Group] = []

    def add(self, names: Sequence[str], kwargs: dict[str, Any], group: _Group | None) -> None:
        """Record one argument (``add_argument``'s names and keywords)."""
        self._args.append(_Arg(names, kwargs, group))

    def add_argument(self, *names: str, **kwargs: Any) -> None:
        """Like :meth:`argparse.ArgumentParser.add_argument`, for the subset the module
        names.

        Raises:
            Unsure: a keyword or action it does not know.
        """
        self.add(names, kwargs, None)

    def add_mutually_exclusive_group(self, *, required: bool = False) -> _Group:
        """Like :meth:`argparse.ArgumentParser.add_mutually_exclusive_group`."""
        group = _Group(self, required)
        self._groups.append(group)
        return group

    def parse_args(self, argv: Sequence[str]) -> Namespace:
        """The namespace :mod:`argparse` would give for ``argv``.

        Raises:
            Unsure: anything but the plain cases (see the module).
        """
        options = {n: a for a in self._args if not a.positional for n in a.names}
        positionals = [a for a in self._args if a.positional]
        values: dict[str, Any] = {}
        given: list[_Arg] = []
        i = 0
        while i < len(argv):
            token = argv[i]
            i += 1
            if token.startswith("-") and token != "-":
                name, eq, inline = token.partition("=")
                arg = options.get(name if token.startswith("--") else token)
                if arg is None or (eq and arg.flag) or token == "--":
                    raise Unsure(f"option {token!r}")
                if arg.flag:
                    values[arg.dest] = True
                elif eq:
                    values[arg.dest] = arg.convert(inline)
                elif i < len(argv) and not argv[i].startswith("-"):
                    values[arg.dest] = arg.convert(argv[i])
                    i += 1
                else:
                    raise Unsure(f"{token} without its value")
                given.append(arg)
            elif len(given_pos := [a for a in given if a.positional]) < len(positionals):
                arg = positionals[len(given_pos)]
                values[arg.dest] = arg.convert(token)
                given.append(arg)
            else:
                raise Unsure(f"extra argument {token!r}")
        for arg in self._args:
            if arg.required and arg not in given:
                raise Unsure(f"{arg.dest} missing")
        for group in self._groups:
            used = {id(a) for a in given if a.group is group}
            if len(used) > 1 or (group.required and not used):
                raise Unsure("exclusive options")
        out = {a.dest: a.default for a in self._args}
        out.update(values)
        return Namespace(**out)

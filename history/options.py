"""Run options as declarations: each option said once, and every place that needs it reads that.

A workload kind lists its own options (``OPTIONS`` of ``workloads/queue.py``, ``admin.py``), a
planned step family its own (``Family.options``, ``steps/rolling.py``); the harness declares
its own the same way, on the fields of ``harness/spec.py``'s ``RunSpec`` (``option(...)``).
Here, below every room that declares options (history/ imports nothing of ours), so that
workloads/ and steps/ share one vocabulary without importing each other. From those
declarations alone come the ``kchaos run`` options
(harness/cli/run_cli.py), the spec's parsing, coercion and per-option validation and the spec
written into plan.json (harness/spec.py), and the terms of the scenario name ``kchaos analyze``
groups runs by (checkers/analyze/scenario.py, handed them by harness/).

An option says:

- its name (the spec's key; ``--name-with-dashes`` on the command line), type, default, help,
  and choices;
- its own refusals (``check``: a range, in a sentence), beside its choices;
- when it may be given (``only_with``: another option's value it needs, e.g. ``--in-flight``
  only with ``--send-mode async``; ``applies_with``: the values of another option it applies
  with, e.g. ``--txn`` only with ``--workload queue``); combinations wider than one other
  option are the workload kind's ``check``;
- how plan.json stores it (``stored``): ``ALWAYS`` for the options the first plans had, so
  those plans stay byte for byte the same, or ``AS_ASKED``, written only when the run asked for
  something other than what a run without it does (the default, or a ``quiet`` value);
- what a new run gets when it does not give the option (``fresh``), where that is not its
  ``default``: ``default`` stays what a stored spec without the option means (a plan written
  before the option, or before its new default, replays as it was), while a new command line,
  spec file or campaign cell gets ``fresh`` (``with_fresh``), written into its plan as asked
  for (``stores``): e.g. ``--send-mode``, sync in every stored plan that does not name it,
  async for a new run;
- whether it is part of what a run tests (``tested``), i.e. of its scenario name;
- for a number, its range (``minimum``/``maximum``, in ``unit``): every number is finite and in
  it, whether it comes from the command line (the click type is made from the range, and the
  help shows it), a spec file, a campaign cell or a stored plan (``coerce`` and ``refuse``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import click

ALWAYS, AS_ASKED = "always", "as-asked"
# An option's ``fresh`` when a new run gets its ``default`` too.
SAME = object()


class OptionError(ValueError):
    """An option value (or a combination) a run cannot use; the message is the whole story."""


# A refusal of one value: (the option's flag spelling, the value) -> a sentence, or None.
Check = Callable[[str, Any], "str | None"]


@dataclass(frozen=True)
class Option:
    name: str
    kind: type  # bool, int, float, str, or list (of strings: --nemesis)
    default: Any = None
    help: str | None = None
    choices: tuple[Any, ...] = ()
    # Spelled in "unknown <noun> 'x': choose one of ..."; default: the name with spaces.
    noun: str | None = None
    check: Check | None = None
    # (option, value): given while that option has another value, it is refused.
    only_with: tuple[str, Any] | None = None
    # (option, values): given while that option has none of these values, it cannot apply and
    # is refused (``refuse_inapplicable``): --txn only with --workload queue, --zookeepers only
    # with --topology zk or migration.
    applies_with: tuple[str, tuple[Any, ...]] | None = None
    stored: str = ALWAYS
    quiet: tuple[Any, ...] = ()
    # A new run's value when it does not give the option (``with_fresh``): SAME (``default``),
    # a value, or a callable of the new run's values (every option's, ``fresh`` values
    # applied) giving it, e.g. --rate's by the send mode.
    fresh: Any = SAME
    tested: bool = True
    # Further click.option arguments (a different default shown, ...).
    cli: Mapping[str, Any] = field(default_factory=dict)
    # A number's range, both ends included (None: no bound that end; NaN and infinity are
    # never a value), and its unit in the sentence that refuses one outside it.
    minimum: float | None = None
    maximum: float | None = None
    unit: str = ""

    @property
    def flag(self) -> str:
        return self.name.replace("_", "-")

    def range_text(self) -> str:
        """The accepted numbers in words: "a number between 1 and 604800 (seconds)"."""
        what = "a whole number" if self.kind is int else "a number"
        low, high = (_show(b) if b is not None else None for b in (self.minimum, self.maximum))
        if low is not None and high is not None:
            what += f" between {low} and {high}"
        elif low is not None:
            what += f" of at least {low}"
        elif high is not None:
            what += f" of at most {high}"
        return what + (f" ({self.unit})" if self.unit else "")

    def out_of_range(self, value: Any) -> str | None:
        """Why a number is not one of this option's, without the flag ("must be ..."), or
        None; not a number (or not a numeric option) is coerce's."""
        if self.kind not in (int, float) or isinstance(value, bool):
            return None
        if not isinstance(value, (int, float)):
            return None
        if (
            (isinstance(value, float) and not math.isfinite(value))
            or (self.minimum is not None and value < self.minimum)
            or (self.maximum is not None and value > self.maximum)
        ):
            return f"must be {self.range_text()}, not {_show(value)}"
        return None

    def click_type(self) -> click.ParamType | None:
        """The command line's type of a numeric option: its range, refused in one sentence
        that names it (and shown in --help); None for the others."""
        if self.kind not in (int, float):
            return None
        return _range_type(self)

    def means_default(self, value: Any) -> bool:
        """Does ``value`` ask for what a run without the option does?"""
        return value is None or value == self.default or value in self.quiet

    def given(self, value: Any) -> bool:
        return not self.means_default(value)

    def stores(self, value: Any) -> bool:
        """Does plan.json's spec carry the option with this value?"""
        return self.stored == ALWAYS or self.given(value)

    def refuse(self, value: Any) -> None:
        """Raises OptionError when the value is not one of the choices or its check refuses it."""
        if value is None:
            return
        if self.choices and value not in self.choices:
            noun = self.noun or self.name.replace("_", " ")
            raise OptionError(
                f"--{self.flag}: unknown {noun} '{value}': choose one of "
                f"{', '.join(map(str, self.choices))}"
            )
        says = self.out_of_range(value)
        if says:
            raise OptionError(f"--{self.flag}: {says}")
        says = self.check(self.flag, value) if self.check else None
        if says:
            # Each refusal starts with the option at fault: a check's own sentence may start
            # with its flag already.
            named = says.startswith((f"--{self.flag}", f"{self.flag} ", f"{self.flag}:"))
            raise OptionError(says if named else f"--{self.flag}: {says}")


def with_fresh(options: Iterable[Option], given: Mapping[str, Any]) -> dict[str, Any]:
    """A new run's values (a command line's, a spec file's, a campaign cell's): ``given``, and
    for each option it does not give (absent or None) with a ``fresh`` value, that value. The
    callables see every option's value (given, fresh, else its default) and are computed again
    until none changes, so one may follow another whatever their order (--rate follows
    --send-mode). A stored plan's spec never goes through this: what it leaves out means
    ``default``."""
    options = list(options)
    out = dict(given)
    open_ = [o for o in options if o.fresh is not SAME and out.get(o.name) is None]
    for o in open_:
        if not callable(o.fresh):
            out[o.name] = o.fresh
    seen = {o.name: o.default for o in options}
    seen.update((k, v) for k, v in out.items() if v is not None)
    computed = [o for o in open_ if callable(o.fresh)]
    for _ in range(len(computed) + 1):
        changed = False
        for o in computed:
            value = o.fresh(seen)
            if o.name not in out or out[o.name] != value:
                out[o.name] = value
                seen[o.name] = o.default if value is None else value
                changed = True
        if not changed:
            return out
    raise ValueError(f"the fresh values of {[o.name for o in computed]} do not settle")


def _as_text(value: Any) -> str:
    """A hint for a number YAML read as text (YAML 1.1 takes 1e3 for a string)."""
    try:
        number = float(value) if isinstance(value, str) else None
    except ValueError:
        return ""
    if number is None or not math.isfinite(number):
        return ""
    return f" (YAML reads {value} as text: write {number!r} or {float(number):.1e})"


def _show(value: Any) -> str:
    """A number as the sentences spell it: 604800, 0.5, inf, nan, 1e+20 (not 1e+20.0)."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:g}"
    text = str(value)
    return text if len(text) <= 20 else f"{value:.3g}"


def _range_type(o: Option) -> click.ParamType:
    base = click.IntRange if o.kind is int else click.FloatRange
    parse = click.INT if o.kind is int else click.FLOAT

    class Bounded(base):  # type: ignore[misc, valid-type]
        def convert(self, value: Any, param: Any, ctx: Any) -> Any:
            try:
                number = parse.convert(value, param, ctx)
            except click.BadParameter:
                self.fail(f"must be {o.range_text()}, not {value!r}", param, ctx)
            says = o.out_of_range(number)
            if says:
                self.fail(says, param, ctx)
            return number

    return Bounded(min=o.minimum, max=o.maximum)


def option(default: Any = None, *, kind: type | None = None, **declared: Any) -> Any:
    """A dataclass field that is also an option's declaration (the harness's ``RunSpec``); the
    name is the field's, the kind the default's type unless given (a default of None says none).
    """
    meta = {"option": {"kind": kind, "default": default, **declared}}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def declared(cls: type) -> tuple[Option, ...]:
    """The options declared on a dataclass's fields with ``option``, in field order."""
    out = []
    for f in dataclasses.fields(cls):
        meta = f.metadata.get("option")
        if meta is None:
            continue
        kind = meta["kind"] or type(meta["default"])
        out.append(Option(name=f.name, **{**meta, "kind": kind}))
    return tuple(out)


class Values(SimpleNamespace):
    """A run's option values as attributes: every option, the harness's, each workload kind's
    and each step family's, and ``releases`` (every Kafka release the run starts on or rolls
    to, first the one it starts on). What a workload's generator and ``check`` and a step
    family's plan and ``check`` are given."""


def refuse_each(options: Iterable[Option], values: Values) -> None:
    """Each option's own refusals: first every option that may always be given, then those
    given without the value of the option they need (named together, in one sentence), then
    the ones left; raises OptionError at the first."""
    options = list(options)
    for o in options:
        if o.only_with is None:
            o.refuse(getattr(values, o.name))
    missing: dict[tuple[str, Any], list[str]] = {}
    for o in options:
        if o.only_with is not None and o.given(getattr(values, o.name)):
            other, wanted = o.only_with
            if getattr(values, other) != wanted:
                missing.setdefault((other, wanted), []).append(o.flag)
    for (other, wanted), flags in missing.items():
        verb = "applies" if len(flags) == 1 else "apply"
        raise OptionError(
            f"{', '.join('--' + f for f in flags)}: only {verb} with --{other.replace('_', '-')} "
            f"{wanted}"
        )
    for o in options:
        if o.only_with is not None:
            o.refuse(getattr(values, o.name))


def refuse_inapplicable(options: Iterable[Option], values: Any) -> None:
    """Options given (not meaning their default) where they cannot apply (``applies_with``),
    named together in one sentence per option they need; raises OptionError at the first."""
    missing: dict[tuple[str, tuple[Any, ...]], list[str]] = {}
    for o in options:
        if o.applies_with is None or not o.given(getattr(values, o.name)):
            continue
        other, wanted = o.applies_with
        if getattr(values, other) not in wanted:
            missing.setdefault((other, wanted), []).append(f"--{o.flag}")
    for (other, wanted), flags in missing.items():
        flag = "--" + other.replace("_", "-")
        verb = "applies" if len(flags) == 1 else "apply"
        raise OptionError(
            f"{', '.join(flags)} only {verb} with {flag} {' or '.join(map(str, wanted))}, "
            f"not {flag} {getattr(values, other)}"
        )


def coerce(o: Option, value: Any) -> Any:
    """A spec file's value into the option's type, with a sentence when it does not fit (it
    starts with the option's flag, as every refusal of a run's options does)."""
    if o.kind is list:
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
        raise OptionError(f"--{o.flag}: must be a comma-separated string or a list of names")
    if value is None:
        return None
    if o.kind is bool:
        if not isinstance(value, bool):
            raise OptionError(f"--{o.flag}: must be true or false, not {value!r}")
        return value
    if o.kind in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise OptionError(f"--{o.flag}: must be a number, not {value!r}{_as_text(value)}")
        says = o.out_of_range(value)
        if says:
            raise OptionError(f"--{o.flag}: {says}")
        if o.kind is int and value != int(value):
            raise OptionError(f"--{o.flag}: must be a whole number, not {value!r}")
        return o.kind(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        # `version: 3.9` unquoted is YAML's number 3.9 (and 3.10 would be 3.1).
        raise OptionError(
            f"--{o.flag}: must be a string, not the number {value!r}: "
            f'quote it ({o.name}: "{value}")'
        )
    if not isinstance(value, str):
        raise OptionError(f"--{o.flag}: must be a string, not {value!r}")
    return value

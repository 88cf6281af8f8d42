"""Command-line options derived from the trainers' config dataclasses, so a setting is typed once.

A config field declared with ``setting(default, help=...)`` carries its help text (and, where the
option is not ``--field-name``, its flags) in the field's metadata; ``config_command`` turns the
fields into a typer command whose options have the field's type, default and help::

    @dataclass
    class MyConfig:
        model: str = setting(help="Base encoder.")
        lr: float = setting(2e-5, help="AdamW learning rate.")

    def run(config: MyConfig, resume: bool) -> None: ...
    command = config_command(MyConfig, run, extra={"resume": (bool, typer.Option(False, help="..."))})
"""
from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any, Callable, Dict, Mapping, Sequence, Tuple

import typer

__all__ = ["Override", "config_command", "setting"]

# a parameter that is not a plain config field, or a field shown otherwise: (type, typer.Option/Argument)
Override = Tuple[Any, Any]


def setting(default: Any = dataclasses.MISSING, *, help: str, flags: Sequence[str] = (), argument: bool = False) -> Any:
    """A config field that also describes its command-line option (`flags` replace ``--field-name``;
    `argument` makes it positional). A list default becomes a default_factory."""
    metadata = {"help": help, "flags": tuple(flags), "argument": argument}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _parameter_info(field: dataclasses.Field) -> Any:
    meta = field.metadata
    if field.default is not dataclasses.MISSING:
        default = field.default
    elif field.default_factory is not dataclasses.MISSING:
        default = field.default_factory()
    else:
        default = ...  # required
    if meta.get("argument"):
        return typer.Argument(default, help=meta["help"])
    return typer.Option(default, *meta.get("flags", ()), help=meta["help"])


def config_command(
    config_class: type,
    run: Callable[..., None],
    *,
    overrides: Mapping[str, Override] = {},
    extra: Mapping[str, Override] = {},
    doc: str = "",
) -> Callable[..., None]:
    """A typer command with one option per field of `config_class` that has `setting` metadata
    (`overrides` replace a field's type and option), plus the `extra` options. It calls
    ``run(config, **extra_values)`` with the config built from the options."""
    hints = typing.get_type_hints(config_class)
    fields = [f for f in dataclasses.fields(config_class) if "help" in f.metadata]
    parameters, annotations = [], {}
    for field in fields:
        annotation, info = overrides.get(field.name, (hints[field.name], None))
        parameters.append((field.name, annotation, info if info is not None else _parameter_info(field)))
    parameters += [(name, annotation, info) for name, (annotation, info) in extra.items()]
    signature = inspect.Signature([
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation)
        for name, annotation, info in parameters
    ])
    annotations = {name: annotation for name, annotation, _ in parameters}
    field_names = {f.name for f in fields}

    def command(**values: Any) -> None:
        settings: Dict[str, Any] = {name: value for name, value in values.items() if name in field_names}
        run(config_class(**settings), **{name: value for name, value in values.items() if name not in field_names})

    command.__signature__ = signature  # type: ignore[attr-defined]
    command.__annotations__ = annotations
    command.__doc__ = doc or run.__doc__
    command.__name__ = getattr(run, "__name__", "command")
    return command

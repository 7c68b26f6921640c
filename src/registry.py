"""A small generic registry: components are classes registered under a name.

Configs refer to components by name (``position: {name: rope, theta: 10000}``); the
builder looks the class up here. Unknown names and unknown keys fail loudly (``ConfigError``) and
list what is accepted, so a typo never silently builds something else (fairseq #4675).

Every registry is filled the same way: ``package`` names the package its variants live in, and
the first lookup imports every module of that package, so a new variant is one new file (or one
new class in an existing file) with ``@REGISTRY.register("<name>")`` and no import line anywhere.

A registered class may define a classmethod ``check_args(**kwargs)`` that validates its
arguments without building anything; ``Registry.check`` calls it when the config is validated
(``ModelConfig`` runs every check once, when it is made), so each argument rule is written once,
beside the component it belongs to, and runs once; ``Registry.build`` and the constructors trust
the validated values.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from src.errors import ConfigError, check_keys, did_you_mean

T = TypeVar("T")


def or_list(names: list[str], quote: bool = False) -> str:
    """['a', 'b', 'c'] -> "a, b or c" (with quote: "'a', 'b' or 'c'")."""
    items = [f"'{n}'" if quote else n for n in names]
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


class Registry(Generic[T]):
    """Maps names to classes of one kind (``position``, ``norm``, ``ffn`` …).

    ``conf``: the config group a variant's YAML goes in (``model/position``), named in the
    error for an unknown name. ``package``: the package (or packages) whose modules hold the
    variants, imported on the first lookup (module docstring).
    """

    def __init__(
        self, kind: str, conf: str | None = None, package: str | tuple[str, ...] | None = None
    ) -> None:
        self.kind = kind
        self.conf = conf
        self.packages = (package,) if isinstance(package, str) else tuple(package or ())
        self._classes: dict[str, type[T]] = {}
        self._discovered = not self.packages

    def _discover(self) -> dict[str, type[T]]:
        """Import every module of each package once (each registers its variants), then the
        classes."""
        if not self._discovered:
            self._discovered = True
            for package in self.packages:
                pkg = importlib.import_module(package)
                for module in sorted(m.name for m in pkgutil.iter_modules(pkg.__path__)):
                    importlib.import_module(f"{package}.{module}")
        return self._classes

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        def deco(cls: type[T]) -> type[T]:
            if name in self._classes and self._classes[name] is not cls:
                raise ConfigError(
                    f"{self.kind} '{name}' is already registered by "
                    f"{self._classes[name].__qualname__}"
                )
            self._classes[name] = cls
            cls.registry_name = name  # type: ignore[attr-defined]
            return cls

        return deco

    def names(self) -> list[str]:
        return sorted(self._discover())

    def in_order(self) -> list[str]:
        """Names in registration order (for messages that list them as the docs do)."""
        return list(self._discover())

    def __contains__(self, name: str) -> bool:
        return name in self._discover()

    def get(self, name: str) -> type[T]:
        if name not in self._discover():
            yaml = f" and add conf/{self.conf}/{name}.yaml" if self.conf else ""
            raise ConfigError(
                f"unknown {self.kind} '{name}'{did_you_mean(str(name), self.names())}; registered "
                f"{self.kind}s: {', '.join(self.names())}. Register a new one with "
                f"@{self.kind.upper()}S.register('{name}'){yaml}"
            )
        return self._classes[name]

    def accepted_keys(self, name: str) -> list[str]:
        sig = inspect.signature(self.get(name).__init__)
        return [p for p in sig.parameters if p != "self"]

    def resolve(self, node: Mapping[str, Any], **context: Any) -> tuple[type[T], dict[str, Any]]:
        """The class ``node['name']`` names and its constructor's keyword arguments: the node's own
        keys plus the ``context`` the constructor accepts. Refuses an unknown name or a key the
        constructor does not take (the structure of the node, not its values)."""
        node = dict(node)
        if "name" not in node:
            raise ConfigError(
                f"{self.kind} config needs a 'name' key (one of: {', '.join(self.names())})"
            )
        name = node.pop("name")
        cls = self.get(name)
        params = inspect.signature(cls.__init__).parameters
        group = self.conf or self.kind
        check_keys(
            node,
            [p for p in params if p != "self"],
            where=f"{group}={name}",
            prefix=f"{group.replace('/', '.')}.",
            shown=[p for p in params if p != "self" and p not in context],
        )
        kwargs = {k: v for k, v in context.items() if k in params and k not in node}
        kwargs.update(node)
        return cls, kwargs

    def check(self, node: Mapping[str, Any], **context: Any) -> tuple[type[T], dict[str, Any]]:
        """Validate ``node`` without building: ``resolve``, then the class's own ``check_args``
        (when it has one) on the node's keys and all of ``context`` (so a message can name sizes the
        constructor does not take). The run-config validation calls this once per component."""
        cls, kwargs = self.resolve(node, **context)
        check_args = getattr(cls, "check_args", None)
        if check_args is not None:
            check_args(**{**context, **{k: v for k, v in node.items() if k != "name"}})
        return cls, kwargs

    def build(self, node: Mapping[str, Any], **context: Any) -> T:
        """Instantiate ``node['name']`` with the node's own keys plus the context it accepts.

        ``node`` holds what the user configured, already validated by ``check`` (``ModelConfig``
        runs every check when it is made), so its values are not checked again here;
        ``context`` holds what the builder knows (d_model, n_head …) and is passed only to
        classes whose constructor takes it.
        """
        cls, kwargs = self.resolve(node, **context)
        return cls(**kwargs)

"""A small generic registry: components are classes registered under a name.

Configs refer to components by name (``position: {name: rope, theta: 10000}``); the
builder looks the class up here. Unknown names and unknown keys fail loudly and list
what is accepted, so a typo never silently builds something else (fairseq #4675).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class RegistryError(KeyError):
    """Raised for unknown component names or keys; the message says what is accepted."""

    def __str__(self) -> str:  # KeyError quotes its message; we want plain text
        return str(self.args[0])


class Registry(Generic[T]):
    """Maps names to classes of one kind (``position``, ``norm``, ``ffn`` …)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._classes: dict[str, type[T]] = {}

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        def deco(cls: type[T]) -> type[T]:
            if name in self._classes and self._classes[name] is not cls:
                raise RegistryError(f"{self.kind} '{name}' is already registered by {self._classes[name].__qualname__}")
            self._classes[name] = cls
            cls.registry_name = name  # type: ignore[attr-defined]
            return cls

        return deco

    def names(self) -> list[str]:
        return sorted(self._classes)

    def __contains__(self, name: str) -> bool:
        return name in self._classes

    def get(self, name: str) -> type[T]:
        if name not in self._classes:
            raise RegistryError(
                f"unknown {self.kind} '{name}'; registered {self.kind}s: {', '.join(self.names())}. "
                f"Register a new one with @{self.kind.upper()}S.register('{name}') and add conf/model/{self.kind}/{name}.yaml"
            )
        return self._classes[name]

    def accepted_keys(self, name: str) -> list[str]:
        sig = inspect.signature(self.get(name).__init__)
        return [p for p in sig.parameters if p != "self"]

    def build(self, node: Mapping[str, Any], **context: Any) -> T:
        """Instantiate ``node['name']`` with the node's own keys plus the context it accepts.

        ``node`` holds what the user configured (must all be accepted, or we raise);
        ``context`` holds what the builder knows (d_model, n_head …) and is passed only to
        classes whose constructor takes it.
        """
        node = dict(node)
        if "name" not in node:
            raise RegistryError(f"{self.kind} config needs a 'name' key (one of: {', '.join(self.names())})")
        name = node.pop("name")
        cls = self.get(name)
        params = inspect.signature(cls.__init__).parameters
        unknown = [k for k in node if k not in params or k == "self"]
        if unknown:
            own = [p for p in params if p != "self" and p not in context]
            raise RegistryError(
                f"{self.kind} '{name}' got unknown key(s) {unknown}; it accepts: {', '.join(own) or '(no keys)'}"
            )
        kwargs = {k: v for k, v in context.items() if k in params and k not in node}
        kwargs.update(node)
        return cls(**kwargs)

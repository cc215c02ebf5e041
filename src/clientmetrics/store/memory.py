"""An in-memory subscription store: the test double, and for throwaway gateways."""

from __future__ import annotations

from clientmetrics.store.base import Change, ChangeListener, ConfigMap, StoreError


class MemorySubscriptionStore:
    """A ``SubscriptionStore`` that keeps everything in a dict; nothing survives."""

    def __init__(self, initial: dict[str, dict[str, str]] | None = None) -> None:
        self._resources: dict[str, dict[str, str]] = {
            name: dict(configs) for name, configs in (initial or {}).items() if configs
        }
        self._on_change: ChangeListener | None = None
        self._open = False

    async def start(self, on_change: ChangeListener) -> dict[str, dict[str, str]]:
        """Return every resource; ``on_change`` sees later puts."""
        self._on_change = on_change
        self._open = True
        return {name: dict(configs) for name, configs in self._resources.items()}

    async def put(self, name: str, configs: ConfigMap) -> None:
        """Replace ``name``'s configs; an empty map deletes it."""
        if not self._open:
            raise StoreError("the store is not started")
        new = dict(configs)
        if self._resources.get(name, {}) == new:
            return
        if new:
            self._resources[name] = new
        else:
            self._resources.pop(name, None)
        if self._on_change is not None:
            self._on_change(name, dict(new))

    async def update(self, name: str, change: Change) -> dict[str, str]:
        """Apply ``change`` to ``name``'s configs (atomic: nothing awaits in between)."""
        if not self._open:
            raise StoreError("the store is not started")
        new = dict(change(dict(self._resources.get(name, {}))))
        await self.put(name, new)
        return new

    async def close(self) -> None:
        """Stop accepting puts (the data stays for a later ``start``)."""
        self._open = False

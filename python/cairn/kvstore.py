"""Key-value stores: `cairn.kvstore.open(url)` for file://, memory:// and
`|ocdbt:` pipelines."""

from __future__ import annotations

from typing import Iterable, Mapping

from cairn import _core


class KvStore:
    """A key-value store. Keys are str ('/'-separated paths by convention);
    values are bytes."""

    def __init__(self, core):
        # `core`: the native store (cairn.kvstore.open makes it).
        self._core = core

    @property
    def url(self) -> str:
        return self._core.url

    def __repr__(self) -> str:
        return f"cairn.kvstore.KvStore({self.url!r})"

    def keys(self, prefix: str = "") -> list[str]:
        """The keys starting with `prefix`, sorted bytewise."""
        return self._core.keys(prefix)

    def list(self, prefix: str = "") -> list[tuple[str, int]]:
        """(key, size in bytes) of the keys starting with `prefix`, sorted."""
        return self._core.list(prefix)

    def get(self, key: str, start: int | None = None, stop: int | None = None) -> bytes:
        """The value of `key`, or its bytes [start, stop) (a negative `start`
        with no `stop`: the last -start bytes). KeyError when `key` is missing."""
        value = self._core.get(key, start, stop)
        if value is None:
            err = KeyError(key)
            err.add_note(f"no key {key!r} in {self.url}")
            raise err
        return value

    def __getitem__(self, key: str) -> bytes:
        return self.get(key)

    def __contains__(self, key: str) -> bool:
        return self._core.get(key, 0, 0) is not None

    def put(self, key: str, value) -> None:
        """Stores `value` (bytes-like) under `key`."""
        self._core.put(key, bytes(value))

    def __setitem__(self, key: str, value) -> None:
        self.put(key, value)

    def put_many(self, items: Mapping[str, object] | Iterable[tuple[str, object]]) -> None:
        """Stores many values as one batch: one atomic commit (one new
        generation) in OCDBT. A value of None deletes its key."""
        pairs = items.items() if isinstance(items, Mapping) else items
        self._core.put_many([(k, None if v is None else bytes(v)) for k, v in pairs])

    def delete(self, key: str) -> None:
        """Removes `key` (no error when it is absent)."""
        self._core.delete(key)

    def __delitem__(self, key: str) -> None:
        self.delete(key)

    def delete_prefix(self, prefix: str) -> None:
        """Removes every key starting with `prefix`."""
        self._core.delete_prefix(prefix)


class OcdbtKvStore(KvStore):
    """An OCDBT database opened from a TensorStore-style spec dict: a KvStore
    plus batched reads and the database's generation and config."""

    def get_many(self, keys: Iterable[str]) -> list[bytes | None]:
        """The values of `keys` (None where absent), from one manifest read,
        reading each B+tree node once."""
        return self._core.get_many(list(keys))

    @property
    def latest_generation(self) -> int:
        return self._core.latest_generation

    @property
    def config(self) -> dict:
        return self._core.config


def open(url) -> KvStore:  # noqa: A001 (mirrors tensorstore.KvStore.open)
    """Opens the store a kvstore URL names: `file:///dir/`, `memory://name/`,
    `file:///dir/|ocdbt:` (a local path stands for file://), or an OCDBT
    database from a TensorStore-style spec dict such as
    `{"driver": "ocdbt", "base": "file:///x/", "config": {...}, "version": g}`."""
    if isinstance(url, Mapping):
        return OcdbtKvStore(_core.open_ocdbt(dict(url)))
    return KvStore(_core.KvStore.open(_core.normalize_url(url)))


def merge_ocdbt(root: str, children: Iterable[str] | None = None,
                config: Mapping | None = None) -> None:
    """Writes the root OCDBT database in `root` (a base URL or local path) whose
    B+tree refers into the per-process child databases `children` (default:
    every `ocdbt.process_<id>/` under root), as Orbax's finalize does, copying
    no value bytes. A key present in two children is an error naming both."""
    _core.merge_ocdbt(_core.normalize_url(root), None if children is None else list(children),
                      None if config is None else dict(config))

"""Model catalog values."""

from __future__ import annotations

import enum
import unicodedata
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from attrs import field, frozen, validators

from clanker.errors import HarnessCapabilityError

__all__ = ["CatalogSource", "Model", "ModelCatalog", "model_text"]


def model_text(value: object) -> str | None:
    """Return ``value`` if it can be a model id or label, else ``None``.

    Usable text is a non-empty string without surrounding whitespace or control
    characters: it must survive a table, a command line and a JSON cache.
    Parsers use this to turn whatever a harness printed into a yes or no.
    """
    if not isinstance(value, str) or not value or value != value.strip():
        return None
    if any(unicodedata.category(c) == "Cc" for c in value):
        return None
    return value


def _text(_: object, attribute: object, value: Any) -> None:
    if value is not None and model_text(value) is None:
        raise ValueError(
            f"{getattr(attribute, 'name', 'value')}: must be text without surrounding "
            "whitespace or control characters"
        )


@frozen(kw_only=True)
class Model:
    """One model a harness can be launched with.

    ``id`` is exactly what the harness's model flag accepts. ``provider`` is
    set where the harness qualifies models by provider.
    """

    id: str = field(validator=_text)
    label: str | None = field(default=None, validator=_text)
    provider: str | None = field(default=None, validator=_text)
    is_default: bool = field(default=False, validator=validators.instance_of(bool))


class CatalogSource(enum.StrEnum):
    """Where the models of a catalog came from."""

    LIVE = "live"  # the harness's own listing, just now
    CACHE = "cache"  # an earlier listing, within (or, on failure, past) its TTL
    FALLBACK = "fallback"  # the provider's intentional static list
    NONE = "none"  # nothing usable


def _models(values: Iterable[Model]) -> tuple[Model, ...]:
    return tuple(values)


@frozen(kw_only=True)
class ModelCatalog:
    """A model listing plus how trustworthy it is.

    ``failure`` is set when the latest attempt to list failed: the models are
    then a stale cache or the fallback list, never a silent empty success.
    """

    harness: str
    models: tuple[Model, ...] = field(converter=_models)
    source: CatalogSource
    fetched_at: datetime | None = None
    failure: HarnessCapabilityError | None = field(default=None, eq=False)

    @property
    def stale(self) -> bool:
        return self.failure is not None and self.source is CatalogSource.CACHE

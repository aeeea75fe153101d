"""The shape of what an extractor reads from one chunk: entities and typed relations.

The same pydantic models validate the deterministic extractor's output and the JSON a provider
model returns (:mod:`switchboard.knowledge.graph.llm`); nothing reaches the database unless it
validates (``extra="forbid"``, closed ``kind`` and ``relation`` vocabularies, bounded lengths).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "EntityKind",
    "RelationType",
    "ExtractedEntity",
    "ExtractedRelation",
    "ChunkExtraction",
    "DocumentExtraction",
    "normalize_name",
    "entity_key",
]

EntityKind = Literal["product", "family", "material", "fluid", "standard", "range"]
"""Products and part numbers, families/series, materials, fluids, standards, ranges with units."""
RelationType = Literal[
    "belongs_to_family",
    "compatible_with",
    "incompatible_with",
    "rated_for",
    "equivalent_of",
    "replaces",
    "made_of",
]
"""``subject relation object``: ``FVAM-2050-B belongs_to_family FVAM``, ``PTFE compatible_with
chlorine``, ``PTFE rated_for -200..260 °C``, ``V200 made_of PTFE`` (a part, seat or body of it)."""

NAME_MAX = 120


def normalize_name(name: str) -> str:
    """The lookup key of an entity name: lower case, single spaces, one spelling of degrees.

    ``" Stainless  Steel 316 "`` → ``"stainless steel 316"``; ``"180 ºC"`` → ``"180 °c"``.
    """
    cleaned = name.replace("º", "°").replace("˚", "°").replace("−", "-").replace("–", "-")
    return " ".join(cleaned.lower().split()).strip(" .,;:()[]")


_KEY_SEPARATORS = re.compile(r"[\s\-_./·'’]+")


def _singular(word: str) -> str:
    """``"oils"`` → ``"oil"``; words of 3 letters or fewer and ``-ss``/``-us``/``-is`` endings kept."""
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def entity_key(name: str, kind: str | None = None) -> str:
    """The identity of an entity name within a tenant (``kg_entities.norm_name``).

    A range keeps :func:`normalize_name` (its minus signs and dots are values). Any other name is
    folded to letters and digits, each word singular: ``BV-40``, ``BV40`` and ``bv 40`` are
    ``"bv40"``; ``Buna-N`` is ``"bunan"``; ``mineral oils`` is ``"mineraloil"``. So the spellings a
    catalogue and its customers use for one code or term meet in one entity.
    """
    normalized = normalize_name(name)
    if kind == "range":  # "..160 °C" (at most) and "160 °C" (one value) are two ranges
        return (".." if name.strip().startswith("..") else "") + normalized
    return "".join(_singular(word) for word in _KEY_SEPARATORS.split(normalized) if word)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, frozen=True)


class ExtractedEntity(_Strict):
    name: str = Field(min_length=1, max_length=NAME_MAX, description="As written, e.g. 'PTFE', 'V200'.")
    kind: EntityKind
    low: float | None = Field(None, description="range only: lower bound (None: unbounded).")
    high: float | None = Field(None, description="range only: upper bound (None: unbounded).")
    unit: str | None = Field(None, max_length=16, description="range only: '°C', 'bar', 'psi'...")

    @field_validator("name")
    @classmethod
    def _has_letters_or_digits(cls, value: str) -> str:
        if not normalize_name(value):
            raise ValueError("an entity name needs letters or digits")
        return value

    @model_validator(mode="after")
    def _range_fields(self) -> ExtractedEntity:
        if self.kind == "range":
            if self.unit is None or (self.low is None and self.high is None):
                raise ValueError("a range needs a unit and at least one bound")
            if self.low is not None and self.high is not None and self.low > self.high:
                raise ValueError("a range's low bound is above its high bound")
        elif (self.low, self.high, self.unit) != (None, None, None):
            raise ValueError("only a range has low, high and unit")
        return self

    @property
    def key(self) -> tuple[str, str]:
        """``(kind, entity_key(name))``: the row of ``kg_entities`` it is stored as (kinds other than
        ``range`` share one key space: :func:`switchboard.knowledge.graph.store.store_graph`)."""
        return self.kind, entity_key(self.name, self.kind)


class ExtractedRelation(_Strict):
    subject: str = Field(min_length=1, max_length=NAME_MAX, description="Name of an entity of this chunk.")
    relation: RelationType
    object: str = Field(min_length=1, max_length=NAME_MAX, description="Name of an entity of this chunk.")


class ChunkExtraction(_Strict):
    """Entities of one chunk and the relations between them that the chunk states."""

    entities: list[ExtractedEntity] = Field(default_factory=list, max_length=200)
    relations: list[ExtractedRelation] = Field(default_factory=list, max_length=400)

    @model_validator(mode="after")
    def _relations_name_entities(self) -> ChunkExtraction:
        names = {normalize_name(e.name) for e in self.entities}
        for relation in self.relations:
            for end in (relation.subject, relation.object):
                if normalize_name(end) not in names:
                    raise ValueError(f"relation end {end!r} is not one of the chunk's entities")
        return self


class DocumentExtraction(_Strict):
    """What a provider model returns for a batch of chunks: one extraction per chunk, in order."""

    chunks: list[ChunkExtraction]

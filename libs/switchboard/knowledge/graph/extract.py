"""The deterministic (offline) extractor: table rows, part-number patterns, lexicons and units.

No model is called, so the graph is built in ``make run`` and in tests. What it reads:

* **Entities**: part numbers (``FVAM-2050-B``, ``QX-1234``: letters and digits), families (a code
  or name next to *series*/*family*: ``V200 series``, ``Series V200``), materials and fluids from
  the lexicons below (longest match first: ``chlorine dioxide`` before ``chlorine``; ``Teflon``
  is PTFE, ``Viton`` is FKM), standards (``ISO 5211``, ``EN 1092-1``, ``NSF/ANSI 61``), and
  ranges with units (``-20 to 200 °C``, ``max. 16 bar``, ``≤ 260 °C``) and single values
  (``55 Shore D``, ``250 °C``). For catalogues beyond the lexicons: codes written with a space
  (``DV 15``), terms written in capitals (``XLPE``, ``LS0H``, ``NaOCl``: a material unless a table
  or glossary says it is a medium), a word before a class noun (``butyl rubber``, ``epoxy resin``),
  table cells by their column (*Medium*, *Sheath*...), the name a heading gives its section when it
  names no known entity (``## Soy lecithin``, ``# Ingredient specification: cocoa butter``), and
  the components a sentence lists (below).
* **Aliases** (``equivalent_of``, which the walk crosses as the same entity): a parenthesis after a
  name (``EPDM (ethylene propylene diene monomer)``, ``ductile iron (EN-GJS-450)``) or an
  abbreviation after its long form (``methyl ethyl ketone (MEK)``); ``also known as``, ``stands
  for``...; in a glossary, ``MEK for methyl ethyl ketone``, ``HFC means ...``, ``X and Y are Z``,
  ``Name: alias, alias`` (a list entry; a rating legend ``Key: A excellent, B good`` is none); a
  heading's parenthesis names the heading's subject (``## Shellac (E904)``), and a data sheet's
  heading names its material with and without the class noun (``## Butyl rubber``: also *Butyl*).
  A glossary's chain of equals signs names one thing (``Sodium hydroxide = caustic soda = lye``); a
  row's subject that adds one word to a lexicon name is that name (``Diesel fuel``: diesel).
  Spellings of one code or term share a key anyway
  (:func:`~switchboard.knowledge.graph.schema.entity_key`: ``BV-40`` = ``BV40``).
* **Relations in prose**, within one sentence: a material or product with a fluid and a
  compatibility word (``resistant``, ``suitable``...; a negation or ``attacks`` makes it
  ``incompatible_with``); a product/family/material with a range (``rated_for``; the chunk's
  first subject when the sentence names none: "Maximum service temperature: 260 °C" on the PTFE
  sheet); a product or family with a material and a part word (``seat``, ``body``, ``made of``:
  ``made_of``; a sentence naming the part and the material but no series: the document's series,
  "Seat options: PTFE or TFM"), or a product said to be one material (``GX-20 gloves are thin
  nitrile gloves``); the components or options a sentence lists after ``made from``, ``coated
  with``, ``contains``... or a colon (``Coating recipe: sugar, cocoa butter and whey powder``), and
  the list items under a line ending in a colon, each ``made_of`` of the product or the document's
  product (an item is cut at its first preposition, after its last number and after *of*: ``a
  topping of sesame seeds``; a piece with a quantity, ``steam up to 130 °C``, and a lone gerund,
  ``cleaning in place``, are none; a label inside the list, ``Construction: tube: UHMWPE``, names
  a part, not a component); a label whose value names a material (``Tube and cover: soft PVC``,
  ``# PT-6 series: PTFE hose``) is ``made_of`` of the document's product; a part number with a
  family (``belongs_to_family``); ``replaces`` / ``supersedes`` / ``replaced by``; ``equivalent
  to`` / ``same as`` / ``interchangeable with``.
* **Topic**: the document's first product, family or material, or the one its latest heading
  names (``## TFM`` in a data sheet of two materials); a paragraph wrapped over lines is read as one.
* **Table rows** (``Header: value; ...``, one chunk per row): the first key column is the row's
  subject; a *series/family* column gives ``belongs_to_family``, a *material/seat/body/seal*
  column ``made_of``, a *temperature/pressure/rating* column ``rated_for`` (unit from the header),
  *replaces*/*replaced by*/*equivalent* columns their relation, and a column named after a fluid
  or material whose cell is a rating (``A``/``B``/yes/✓/resistant vs ``C``/``D``/no/✗/not
  recommended) a compatibility relation, and so is a wide table's column named by a short header
  outside the lexicons (``Chemical: Acetone; UHMWPE: A; CSM: C``) when the row has two or more
  such rating columns; a long-form row (Material, Fluid, Rating) likewise, any rating word
  linking the row's material and medium (*limited*: compatible, *poor*: not); a
  long-form row whose other column no rule names (``Ingredient: Soy lecithin; Allergen or diet:
  Soy; Status: contains``) links its subject (a material, unless a code) and that cell by its
  verdict: *contains*/*may contain* ``made_of``, a rating as above, *free* ``compatible_with``; a
  concentration is not part of a name (``Sulfuric acid 98%``), a parenthesis is an alias.

:func:`question_names` gives the names a question may use for entities (the lookup of the graph
walk), with the same lexicons.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from switchboard.knowledge.graph.schema import (
    NAME_MAX,
    ChunkExtraction,
    EntityKind,
    ExtractedEntity,
    ExtractedRelation,
    RelationType,
    entity_key,
    normalize_name,
)

__all__ = [
    "MATERIALS",
    "FLUIDS",
    "extract_chunk",
    "extract_document",
    "question_names",
    "question_units",
    "relation_cues",
    "parse_row",
]

MATERIALS: Mapping[str, str] = {
    # spelling (lower case) -> canonical name
    "ptfe": "PTFE",
    "teflon": "PTFE",
    "polytetrafluoroethylene": "PTFE",
    "rptfe": "RPTFE",
    "pfa": "PFA",
    "fep": "FEP",
    "pvdf": "PVDF",
    "peek": "PEEK",
    "pom": "POM",
    "acetal": "POM",
    "nylon": "PA",
    "polyamide": "PA",
    "pp": "PP",
    "polypropylene": "PP",
    "hdpe": "HDPE",
    "pvc": "PVC",
    "pvc-u": "PVC",
    "cpvc": "CPVC",
    "abs": "ABS",
    "epdm": "EPDM",
    "nbr": "NBR",
    "buna-n": "NBR",
    "nitrile": "NBR",
    "fkm": "FKM",
    "viton": "FKM",
    "ffkm": "FFKM",
    "kalrez": "FFKM",
    "hnbr": "HNBR",
    "silicone": "silicone",
    "vmq": "silicone",
    "neoprene": "CR",
    "chloroprene": "CR",
    "graphite": "graphite",
    "ceramic": "ceramic",
    "brass": "brass",
    "bronze": "bronze",
    "copper": "copper",
    "aluminium": "aluminium",
    "aluminum": "aluminium",
    "cast iron": "cast iron",
    "ductile iron": "ductile iron",
    "carbon steel": "carbon steel",
    "stainless steel": "stainless steel",
    "stainless steel 316": "stainless steel 316",
    "stainless steel 316l": "stainless steel 316L",
    "stainless steel 304": "stainless steel 304",
    "aisi 316": "stainless steel 316",
    "aisi 316l": "stainless steel 316L",
    "aisi 304": "stainless steel 304",
    "duplex": "duplex steel",
    "duplex steel": "duplex steel",
    "hastelloy": "Hastelloy",
    "hastelloy c-276": "Hastelloy C-276",
    "titanium": "titanium",
    "monel": "Monel",
    "inconel": "Inconel",
}
"""Materials (seats, seals, bodies, linings) by every spelling read."""

FLUIDS: Mapping[str, str] = {
    "water": "water",
    "drinking water": "drinking water",
    "potable water": "drinking water",
    "seawater": "seawater",
    "sea water": "seawater",
    "steam": "steam",
    "air": "air",
    "compressed air": "compressed air",
    "nitrogen": "nitrogen",
    "oxygen": "oxygen",
    "hydrogen": "hydrogen",
    "chlorine": "chlorine",
    "chlorine dioxide": "chlorine dioxide",
    "sodium hypochlorite": "sodium hypochlorite",
    "hypochlorite": "sodium hypochlorite",
    "bleach": "sodium hypochlorite",
    "hydrochloric acid": "hydrochloric acid",
    "sulfuric acid": "sulfuric acid",
    "sulphuric acid": "sulfuric acid",
    "nitric acid": "nitric acid",
    "phosphoric acid": "phosphoric acid",
    "acetic acid": "acetic acid",
    "caustic soda": "sodium hydroxide",
    "sodium hydroxide": "sodium hydroxide",
    "ammonia": "ammonia",
    "ethanol": "ethanol",
    "methanol": "methanol",
    "acetone": "acetone",
    "glycol": "glycol",
    "ethylene glycol": "glycol",
    "diesel": "diesel",
    "gasoline": "gasoline",
    "petrol": "gasoline",
    "hydraulic oil": "hydraulic oil",
    "mineral oil": "mineral oil",
    "natural gas": "natural gas",
    "ozone": "ozone",
    "hydrogen peroxide": "hydrogen peroxide",
    "brine": "brine",
}
"""Fluids and media by every spelling read."""

_LEXICON: dict[str, tuple[EntityKind, str]] = {
    **{k: ("material", v) for k, v in MATERIALS.items()},
    **{k: ("fluid", v) for k, v in FLUIDS.items()},
}


def _trie_pattern(words: Iterable[str]) -> str:
    """A regex matching the same as the alternation of ``words`` longest first, as a prefix tree.

    ``stainless steel(?: 3(?:04|16(?:l)?))?``: at each letter one branch at most can match, and a
    word that continues is tried before the shorter one that ends there, so with backtracking the
    longest word that fits (its lookahead included) still wins, as in ``longest|long``. Python's
    ``re`` tries the alternatives of a flat alternation one by one at every word start; the tree
    reads each letter once (the lexicon scan was a third of the extractor's time).
    """
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + emit(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(trie)


_LEXICON_RE = re.compile(r"(?<![\w-])(" + _trie_pattern(_LEXICON) + r")(?![\w])", re.IGNORECASE)
_NOT_CODES = re.compile(r"^(?:DN|PN|NPS|M|G|R|ISO|EN|DIN|ASTM|ASME|API|ANSI|NSF|IEC|UL|BS|AISI)\d", re.I)
_CODE = re.compile(
    r"(?<![\w-])(?=[A-Z0-9-]*\d)(?=[A-Z0-9-]*[A-Z])[A-Z][A-Z0-9]{0,7}(?:-[A-Z0-9]{1,8}){0,3}(?![\w-])"
)
_SPACED_CODE = re.compile(
    r"(?<![\w-])([A-Z]{2,4}) (\d{1,4})(?![\w.,/-]|\s?(?:°|%|x\b|mm|bar|psi|kV|V\b|A\b|h\b|s\b|m\b|kg|g\b))"
)
"""A code written with a space, ``DV 15``, ``SX 6`` (not ``PN 16``: :data:`_NOT_CODE_WORDS`)."""
_ACRONYM = re.compile(r"(?<![\w-])(?=(?:[a-z0-9]*[A-Z]){2})[A-Z][A-Za-z0-9]{1,5}(?![\w-])")
"""A term written in capitals (two at least), ``XLPE``, ``LS0H``, ``NaOCl``: materials, media, compounds."""
_NOT_CODE_WORDS = frozenset(
    "dn pn nps iso en din astm asme api ansi nsf iec ul bs aisi wras dc ac eur usd gbp faq ok pdf csv sku id no"
    " us uk eu ce and or the for not new tel fax www http https url vat qty pcs max min ip ce rohs reach uv"
    " pe mm kv kw hz rpm mpa kpa mbar nm".split()
)
"""Capitalized words that are units, prefixes of standards or sizes, or plain words, not entities."""
_DEFINED = re.compile(r"\(([^()]{2,100})\)")
_ALIAS_CUE = re.compile(
    r"\s*,?\s*\b(?:also known as|also called|also written(?: as)?|a\.k\.a\.|aka|known as|short for|stands for"
    r"|is an abbreviation (?:of|for)|abbreviated(?: as)?|trade ?names?:?|sold as)\s+",
    re.I,
)
_GLOSSARY = re.compile(
    r"\b(glossary|synonyms?|aliases|abbreviations|also known as|customers (?:often |usually )?(?:write|say|call|ask)"
    r"|stands for|means)\b",
    re.I,
)
"""A chunk that defines names (a glossary): its ``X for Y``, ``X means Y``, ``X is Y`` sentences are aliases."""
_GLOSS_CUE = re.compile(
    r"\s+(?:for|means|stands for|is short for|is usually|are usually|is often|are often|is|are|=|->|→)\s+",
    re.I,
)
_TERM_SPLIT = re.compile(r"\s*(?:,|;|\bor\b|\band\b|/)\s*", re.I)
_TERM_DROP = re.compile(r"^(?:also|usually|often|the|a|an|i\.e\.|ie|aka|simply|commonly|called)\s+", re.I)
_NOT_ALIAS_START = re.compile(
    r"^(?:see|e\.g\.|eg|for|in|at|per|with|from|to|max|min|up|suffix|prefix|type|page|table|note|optional|approx"
    r"|about|not|only|if|when|where|which|that|this|these|those|each|every|all|some|any)\b",
    re.I,
)
_MATERIALISH = re.compile(
    r"(poly|rubber|elastomer|monomer|steel|iron|plastic|compound|resin|metal|alloy|ceramic|graphite|glass|fibre|fiber"
    r"|copper|aluminium|brass|bronze|PTFE|olefin|ethylene|urethane|nylon|silicone|thermoplastic)",
    re.I,
)
_PERCENT_TAIL = re.compile(r"\s+\d+(?:[.,]\d+)?\s*%\s*$")
_FAMILY_WORDS = r"(?:series|family|product line)"
_FAMILY = re.compile(
    rf"(?<![\w-])(?:{_FAMILY_WORDS}\s+([A-Z][A-Za-z0-9-]{{1,15}})|([A-Z][A-Za-z0-9-]{{1,15}})[- ]{_FAMILY_WORDS})(?![\w])",
    re.IGNORECASE,
)
_FAMILY_WORD = re.compile(_FAMILY_WORDS, re.IGNORECASE)
"""Gate of :data:`_FAMILY`: both of its forms contain one of these words."""
_DIGIT = re.compile(r"\d")
_STANDARD = re.compile(
    r"(?<![\w/])((?:ISO|EN|DIN|ASTM|ASME|API|ANSI|NSF|IEC|UL|BS|WRAS)(?:/(?:ISO|EN|DIN|ANSI|NSF|IEC))?"
    r"\s?[A-Z]?\d+(?:[.-]\d+)*)(?![\w])"
)
_NUMBER = r"[-+]?\d+(?:[.,]\d+)?"
_UNIT = r"(°\s?C|°\s?F|deg\s?C|degC|barg?|psi|MPa|kPa|mbar|mm|l/min|m3/h|m³/h|Nm|rpm|kW|kV|V|Shore\s?[AD])"
_RANGE = re.compile(
    rf"({_NUMBER})\s*(?:{_UNIT})?\s*(?:to|\.\.|…|-|and)\s*({_NUMBER})\s*{_UNIT}(?![\w])", re.I
)
_BOUND = re.compile(
    rf"(max(?:imum)?\.?|up to|≤|<=|<|at most|not (?:to )?exceed(?:ing)?|ceiling|min(?:imum)?\.?|≥|>=|>|at least|from)"
    rf"[^.;\d]{{0,60}}?({_NUMBER})\s*{_UNIT}(?![\w])",
    re.I,
)
_VALUE = re.compile(rf"({_NUMBER})\s*{_UNIT}(?![\w])", re.I)
_SENTENCES = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])|\n+|;\s+")
_NEGATIVE = re.compile(
    r"\b(not (?:be )?(?:compatible|suitable|recommended|resistant)|incompatible|unsuitable|attacks?|attacked"
    r"|avoid|must not|do not use|never use|not for use|poor resistance|degrades?)\b",
    re.I,
)
_POSITIVE = re.compile(
    r"\b(compatible|resistant|resists|suitable|recommended|approved for|for use with|handles?|withstands?"
    r"|excellent|good resistance)\b",
    re.I,
)
_PART_WORDS = re.compile(
    r"\b(seats?|seals?|body|bodies|disc|ball|stem|gaskets?|lining|lined|liners?|made (?:of|from)|materials?"
    r"|o-rings?|diaphragms?|housing|packing|trim|sheaths?|jackets?|insulation|insulated|wedge|coating|coated"
    r"|encapsulated|conductors?|compound)\b",
    re.I,
)
_REPLACES = re.compile(r"\b(replaces|supersedes|successor (?:of|to)|replacement for)\b", re.I)
_REPLACED_BY = re.compile(r"\b(replaced by|superseded by|succeeded by)\b", re.I)
_EQUIVALENT = re.compile(
    r"\b(equivalent (?:of|to)|same as|interchangeable with|alternative to|equals)\b", re.I
)
_RATING_POSITIVE = re.compile(
    r"^(?:(a|b|1|2|yes|y|ok|good|very good|excellent|compatible|resistant|suitable|recommended|limited|fair"
    r"|moderate|conditional|conditionally|restricted)\b|[✓✔+])",
    re.I,
)
"""A rating that links a row's material and medium as ``compatible_with``; *limited* and *fair* too
(the row's text keeps the rating; what matters for retrieval is that the row links the two)."""
_RATING_NEGATIVE = re.compile(
    r"^(?:(c|d|3|4|x|no|n|not|poor|severe|incompatible|not recommended|unsuitable|not suitable|attack\w*)\b"
    r"|[✗✘-])",
    re.I,
)
_H_FAMILY = re.compile(r"\b(series|family|product line)\b", re.I)
_H_MATERIAL = re.compile(
    r"\b(material|seat|seal|body|disc|ball|gasket|lining|liner|o-ring|diaphragm|trim|sheath|jacket|insulation"
    r"|coating|compound)\b",
    re.I,
)
_H_RATED = re.compile(r"\b(temp|temperature|pressure|rating|rated|range|max|min|limit)\b", re.I)
_H_REPLACED_BY = re.compile(r"\b(replaced by|superseded by|successor)\b", re.I)
_H_REPLACES = re.compile(r"\b(replaces|supersedes|replacement for|old part)\b", re.I)
_H_EQUIVALENT = re.compile(r"\b(equivalent|alternative|cross[- ]?reference|interchangeable)\b", re.I)
_H_STANDARD = re.compile(r"\b(standard|approval|certification|norm)\b", re.I)
_H_FLUID = re.compile(r"\b(fluid|medium|media|chemical|substance)\b", re.I)
_H_COMPAT = re.compile(r"\b(rating|compatibility|resistance|result|suitability|status|verdict)\b", re.I)
_CONTAINS = re.compile(r"^(?:contains?|may contain|traces?(?: of)?|present|included)\b", re.I)
"""A verdict that the row's subject contains the other cell's thing (``contains``, ``may contain``):
``made_of``."""
_ABSENT = re.compile(r"^(?:free|absent|not present|none)\b", re.I)
"""A verdict that it does not (``free``): the row still links the two, as ``compatible_with`` (free of
it, fit for whom avoids it); the row's text keeps the verdict."""
_SUBJECT_KINDS: tuple[EntityKind, ...] = ("product", "family", "material")


def _unit(raw: str) -> str:
    compact = raw.replace(" ", "").lower()
    return {
        "°c": "°C",
        "degc": "°C",
        "°f": "°F",
        "bar": "bar",
        "barg": "bar",
        "psi": "psi",
        "mpa": "MPa",
        "kpa": "kPa",
        "mbar": "mbar",
        "mm": "mm",
        "l/min": "l/min",
        "m3/h": "m³/h",
        "m³/h": "m³/h",
        "nm": "Nm",
        "rpm": "rpm",
        "kw": "kW",
        "kv": "kV",
        "v": "V",
        "shorea": "Shore A",
        "shored": "Shore D",
    }.get(compact, raw)


def _number(raw: str) -> float:
    return float(raw.replace(",", ".").replace("+", ""))


def _fmt(value: float) -> str:
    return str(int(value)) if value.is_integer() else f"{value:g}"


def range_entity(low: float | None, high: float | None, unit: str) -> ExtractedEntity:
    """A range entity named ``-20..200 °C``, ``..260 °C`` (at most), ``5.. bar`` (at least) or ``55 Shore D``
    (one value)."""
    if low is not None and high is not None and low > high:
        low, high = high, low
    if low is not None and low == high:
        name = f"{_fmt(low)} {unit}"
    else:
        name = f"{_fmt(low) if low is not None else ''}..{_fmt(high) if high is not None else ''} {unit}"
    return ExtractedEntity(name=name, kind="range", low=low, high=high, unit=unit)


@dataclass
class _Found:
    """Entities of a piece of text with their positions (for sentence-level relations)."""

    items: list[tuple[int, ExtractedEntity]] = field(default_factory=list)
    text: str = ""

    def copula_between(self, start: int, end: int) -> bool:
        """Whether ``is`` or ``are`` is written between the two positions."""
        return re.search(r"\b(?:is|are)\b", self.text[start:end]) is not None

    def add(self, position: int, entity: ExtractedEntity) -> None:
        self.items.append((position, entity))

    def of(self, *kinds: EntityKind) -> list[ExtractedEntity]:
        return [e for _, e in sorted(self.items, key=lambda item: item[0]) if e.kind in kinds]


def _normalize_text(text: str) -> str:
    return text.replace("º", "°").replace("˚", "°").replace("−", "-").replace("–", "-").replace("—", "-")


_CLASSED_GATE = re.compile(r"\b(?:rubber|resin|elastomer)\b", re.I)
_CLASSED = re.compile(r"(?<![\w-])([A-Za-z][a-z]{2,}) (?:rubber|resin|elastomer)(?![\w-])", re.I)
"""A material named by a word and its class noun: ``butyl rubber``, ``epoxy resin``."""
_CLASSED_NOT = re.compile(
    r"^(?:the|and|any|other|all|its|their|this|that|our|one|two|some|for|with|from|soft|hard|seat|seal|body"
    r"|liner|lining|sheath|jacket|coating|compound|diaphragm|gasket|wedge|good|poor|first|second|same|synthetic)$",
    re.I,
)
"""Words before a class noun that do not name a material: articles, pronouns, parts, adjectives of degree."""


def _find(text: str) -> _Found:
    """Every entity in ``text`` (families before part numbers, lexicon words, standards, ranges)."""
    found = _Found(text=text)
    taken: list[tuple[int, int]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= s or start >= e for s, e in taken)

    # standards, codes, ranges and bounds all need a digit, families one of their words: most
    # sentences of prose have neither, and skipping those scans changes nothing they could find
    digits = _DIGIT.search(text) is not None
    for match in _STANDARD.finditer(text) if digits else ():
        found.add(match.start(), ExtractedEntity(name=" ".join(match.group(1).split()), kind="standard"))
        taken.append(match.span())
    for match in _FAMILY.finditer(text) if _FAMILY_WORD.search(text) else ():
        name = match.group(1) or match.group(2)
        if name.lower() in ("the", "a", "this", "our", "each", "every", "all") or name.lower() in _LEXICON:
            continue
        found.add(match.start(), ExtractedEntity(name=name, kind="family"))
        taken.append(match.span())
    families = {normalize_name(e.name) for e in found.of("family")}
    for match in _CODE.finditer(text) if digits else ():
        if not free(*match.span()) or _NOT_CODES.match(match.group(0)):
            continue
        code = match.group(0)
        kind: EntityKind = "family" if normalize_name(code) in families else "product"
        found.add(match.start(), ExtractedEntity(name=code, kind=kind))
        taken.append(match.span())
    for match in _SPACED_CODE.finditer(text) if digits else ():
        if not free(*match.span()) or match.group(1).lower() in _NOT_CODE_WORDS:
            continue
        code = match.group(0)
        kind = "family" if normalize_name(code) in families else "product"
        found.add(match.start(), ExtractedEntity(name=code, kind=kind))
        taken.append(match.span())
    for match in _LEXICON_RE.finditer(text):
        if not free(*match.span()):
            continue
        kind, canonical = _LEXICON[match.group(1).lower()]
        if len(match.group(1)) <= 3 and not match.group(1).isupper():
            continue  # "pp", "pom", "abs", "air" written in lower case are words, not the material
        found.add(match.start(), ExtractedEntity(name=canonical, kind=kind))
        taken.append(match.span())
    for match in _CLASSED.finditer(text) if _CLASSED_GATE.search(text) else ():
        # "butyl rubber", "epoxy resin": a word the class noun makes a material (not "the rubber")
        if not free(*match.span()) or _CLASSED_NOT.match(match.group(1)):
            continue
        found.add(match.start(), ExtractedEntity(name=match.group(0), kind="material"))
        taken.append(match.span())
    for match in _ACRONYM.finditer(text):
        if (
            not free(*match.span())
            or match.group(0).lower() in _NOT_CODE_WORDS
            or _NOT_CODES.match(match.group(0))
        ):
            continue
        found.add(match.start(), ExtractedEntity(name=match.group(0), kind="material"))
        taken.append(match.span())
    for match in _RANGE.finditer(text) if digits else ():
        if not free(*match.span()):
            continue
        low, high = _number(match.group(1)), _number(match.group(3))
        if (
            low > high
            and match.group(0).count("-") == 1
            and "-" in match.group(0).split(match.group(1), 1)[1]
        ):
            continue
        found.add(match.start(), range_entity(low, high, _unit(match.group(4))))
        taken.append(match.span())
    for match in _BOUND.finditer(text) if digits else ():
        if not free(match.start(2), match.end()):
            continue
        value, unit = _number(match.group(2)), _unit(match.group(3))
        at_most = (
            match.group(1).lower().rstrip(".")
            in ("max", "maximum", "up to", "≤", "<=", "<", "at most", "ceiling")
            or "exceed" in match.group(1).lower()
        )
        found.add(match.start(), range_entity(None if at_most else value, value if at_most else None, unit))
        taken.append((match.start(2), match.end()))
    for match in _VALUE.finditer(text) if digits else ():
        # a quantity on its own ("Hardness 55 Shore D", "250 °C in a short circuit"): a point
        if free(*match.span()):
            value = _number(match.group(1))
            found.add(match.start(), range_entity(value, value, _unit(match.group(2))))
            taken.append(match.span())
    return found


def _term(raw: str) -> str | None:
    """A name as a glossary or a parenthesis writes it: articles and *also* dropped; ``None`` when it
    is not a name (empty, more than five words, a sentence, a number or a quantity)."""
    term = raw.strip(" .,;:!?\"'“”‘’*")
    while True:
        shorter = _TERM_DROP.sub("", term)
        if shorter == term:
            break
        term = shorter
    if not term or len(term.split()) > 5 or len(term) > NAME_MAX or _NOT_ALIAS_START.match(term):
        return None
    if not re.search(r"[A-Za-z]", term) or _VALUE.search(term) or re.fullmatch(r"[\d\s.,%+-]+", term):
        return None
    return term


def _term_entity(term: str, like: ExtractedEntity | None = None) -> ExtractedEntity:
    """The entity a term names: the lexicon's, else of ``like``'s kind, else material or fluid by its words."""
    known = _LEXICON.get(term.lower())
    if known is not None:
        return ExtractedEntity(name=known[1], kind=known[0])
    if like is not None and like.kind != "range":
        kind: EntityKind = like.kind
    elif _CODE.fullmatch(term) or _SPACED_CODE.fullmatch(term):
        kind = "product"
    else:
        kind = "material" if _MATERIALISH.search(term) else "fluid"
    return ExtractedEntity(name=term, kind=kind)


_GENERIC_NOUNS = re.compile(
    r"^(?:\s+(?:sheath|insulation|seat|seats|body|liner|lining|compound|material|grade|type|rubber|resin|steel|iron"
    r"|elastomer|plastic|polymer|seal|seals|diaphragm|jacket|coating|series|valves?|cables?))*$",
    re.I,
)


_CLASS_NOUNS = r"(?:rubber|resin|elastomer|plastic|polymer|compound|material|grade)"
"""Words that say what class a material is (``butyl rubber``): the name without them is the same."""


def _anchor(before: str) -> ExtractedEntity | None:
    """The entity a parenthesis explains: the name right before it (``PTFE (...)``), or one followed
    only by generic nouns (``LSZH sheath compound (...)``)."""
    tail = before[-40:]
    found = _find(tail).items
    for position, entity in sorted(found, key=lambda item: -item[0]):
        if entity.kind == "range":
            continue
        rest = tail[position:]
        word = re.match(r"\S+", rest)
        if word and _GENERIC_NOUNS.match(rest[word.end() :]):
            return entity
        return None
    return None


def _initials_match(words: list[str], acronym: str) -> bool:
    letters = "".join(w[0] for w in words if w).lower()
    target = re.sub(r"[^a-z]", "", acronym.lower())
    return bool(target) and letters[:1] == target[:1] and all(c in letters for c in target)


def _aliases(
    text: str, glossary: bool, heading: bool = False
) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]:
    """Names one sentence says are the same thing, as ``equivalent_of`` pairs.

    * a parenthesis after a name: ``EPDM (ethylene propylene diene monomer)``, ``FKM (fluoroelastomer,
      Viton)``, ``ductile iron (EN-GJS-450)``; an abbreviation in a parenthesis after its long form:
      ``methyl ethyl ketone (MEK)``;
    * a cue: ``X, also known as Y``, ``X stands for Y``, ``trade name Y``;
    * in a glossary (``glossary``): ``MEK for methyl ethyl ketone``, ``NaOCl or bleach for sodium
      hypochlorite``, ``HFC means water-glycol hydraulic fluid``, ``cutting oil and machine oil are
      mineral oils``, ``X: Y``.
    """
    entities: list[ExtractedEntity] = []
    relations: list[ExtractedRelation] = []

    def same(a: ExtractedEntity, b: ExtractedEntity) -> None:
        if entity_key(a.name, a.kind) == entity_key(b.name, b.kind):
            return
        entities.extend((a, b))
        relations.append(ExtractedRelation(subject=a.name, relation="equivalent_of", object=b.name))

    for match in _DEFINED.finditer(text):
        before = text[max(0, match.start() - 60) : match.start()].rstrip()
        inside = match.group(1)
        anchor = _anchor(before)
        parts = [_term(part) for part in _TERM_SPLIT.split(inside)]
        if anchor is None and heading and "/" not in inside:  # "(PE/EVOH)": layers, not names
            # "## Shellac (E904)", "# Data sheet: polyvinyl alcohol (PVA, PVOH)": a heading names one
            # thing, written before its parenthesis (after the title's colon)
            name = _term(re.split(r":\s", before.lstrip("# "))[-1])
            if name is not None and len(name.split()) <= 4 and not _ITEM_STOP.search(name):
                like = next((e for p in parts if p and (e := _lexicon_entity(p))), None)
                anchor = _term_entity(name, like) if _lexicon_entity(name) or like else None
                anchor = anchor or ExtractedEntity(name=name, kind="material")
                head = re.fullmatch(rf"(.+?)\s+{_CLASS_NOUNS}", name, re.I)
                if head is not None and anchor.kind == "material":
                    same(ExtractedEntity(name=head.group(1), kind="material"), anchor)  # butyl rubber: butyl
        if anchor is not None and anchor.kind != "range":
            for part in parts:
                if part is not None:
                    same(anchor, _term_entity(part, anchor))
        elif len(parts) == 1 and parts[0] is not None and _ACRONYM.fullmatch(parts[0]):
            words = re.findall(r"[A-Za-z][\w-]*", before)
            for size in range(2, min(len(words), 6) + 1):
                if _initials_match(words[-size:], parts[0]) and len(words[-size:]) >= len(parts[0]) - 1:
                    long_form = _term(" ".join(words[-size:]))
                    if long_form is not None:
                        entity = _term_entity(long_form)
                        same(entity, _term_entity(parts[0], entity))
                    break
    for match in _CLASSED.finditer(text) if heading else ():
        # "## Butyl rubber": a data sheet's heading names the material; the class noun is no part of it
        if not _CLASSED_NOT.match(match.group(1)):
            same(
                ExtractedEntity(name=match.group(1), kind="material"),
                ExtractedEntity(name=match.group(0), kind="material"),
            )
    for match in _ALIAS_CUE.finditer(text):
        left = _find(text[max(0, match.start() - 40) : match.start()]).items
        right_text = re.split(r"[.;,()]", text[match.end() :], maxsplit=1)[0]
        right = _term(right_text)
        if right is None:
            continue
        anchor = max(left, key=lambda item: item[0])[1] if left else None
        if anchor is None:
            raw = _term(re.split(r"[.;:,()]", text[: match.start()])[-1])
            anchor = _term_entity(raw) if raw else None
        if anchor is not None and anchor.kind != "range":
            same(anchor, _term_entity(right, anchor))
    if glossary and not heading:  # a heading ("## 6. Tables: one fact per row") is no glossary entry
        for segment in re.split(r"[;\n]|(?<=[.!?])\s+", text):
            segment = segment.split(":")[-1] if _GLOSS_CUE.search(segment.split(":")[-1]) else segment
            segment = _LIST_ITEM.sub("", segment.strip())
            if segment.startswith("#"):
                continue  # a glossary's title ("# Glossary: other names of media") names no alias
            cue = _GLOSS_CUE.search(segment)
            if cue is None:
                left_text, sep, right_text = segment.partition(":")
                if not sep:
                    continue
                if "," in right_text:
                    _glossary_list(left_text, right_text, same)
                    continue
            else:
                left_text, right_text = segment[: cue.start()], segment[cue.end() :]
            right_main, _, right_more = right_text.partition("(")
            # "Sodium hydroxide = caustic soda = lye": every name of a chain is the same thing
            right_main, *links = re.split(r"\s+(?:=|->|→)\s+", right_main)
            chained = [term for link in links if (term := _term(link)) is not None]
            right = _term(right_main)
            lefts = [_glossary_term(part) for part in _TERM_SPLIT.split(left_text)]
            if right is None or not any(lefts):
                continue
            extras = (
                [_term(part) for part in _TERM_SPLIT.split(right_more.split(")")[0])] if right_more else []
            )
            like = next((_lexicon_entity(t) for t in [right, *lefts] if t and _lexicon_entity(t)), None)
            target = _term_entity(right, like)
            for term in [*lefts, *extras, *chained]:
                if term is None:
                    continue
                same(_term_entity(term, target), target)
                head = re.split(r"\s+(?:in|of|for|from|with|based on)\s+|-based\b", term)[0]
                if head != term and _term(head) and term not in chained:
                    same(_term_entity(head, target), target)
    return entities, relations


def _is_rating(text: str) -> bool:
    """Whether a text starts with a whole rating word: ``B good``, ``limited``, ``not recommended``
    (not ``2-butanone``, whose ``2`` is no word of its own)."""
    words = text.split()
    return any(
        rating.fullmatch(" ".join(words[:size]))
        for rating in (_RATING_POSITIVE, _RATING_NEGATIVE)
        for size in (1, 2)
        if len(words) >= size
    )


def _glossary_list(
    left_text: str, right_text: str, same: Callable[[ExtractedEntity, ExtractedEntity], None]
) -> None:
    """A glossary entry ``Name: alias, alias, alias`` (``Methyl ethyl ketone: MEK, butanone``): each
    alias is the name; an item with a number word is a note (``good over 240``), a rating a legend
    (``B good``), not a name."""
    name = _term(left_text)
    if name is None:
        return
    target = _term_entity(name, _lexicon_entity(name))
    for part in _TERM_SPLIT.split(re.sub(r"\([^)]*\)", " ", right_text)):
        alias = _term(part)
        if (
            alias is None
            or any(re.fullmatch(r"[\d.,%<>]+", word) for word in alias.split())
            or _is_rating(part)
        ):
            continue  # "Rating key: A excellent, B good": a legend, not names
        same(_term_entity(alias, target), target)


def _glossary_term(raw: str) -> str | None:
    """A glossary's left-hand name: ``Customers often write MEK`` is ``MEK`` (the code or capitals
    word that ends a longer phrase), else :func:`_term`."""
    term = _term(raw)
    if term is not None and len(term.split()) > 2:
        last = term.split()[-1]
        if _ACRONYM.fullmatch(last) or _CODE.fullmatch(last):
            return last
    return term


def _lexicon_entity(term: str) -> ExtractedEntity | None:
    known = _LEXICON.get(term.lower())
    return ExtractedEntity(name=known[1], kind=known[0]) if known else None


def _chunk_extraction(
    entities: Iterable[ExtractedEntity], relations: Iterable[ExtractedRelation]
) -> ChunkExtraction:
    """The chunk's entities, one per key, and its relations, each end named as the entity kept for
    its key (``mineral oils`` in a relation, ``mineral oil`` kept: the same entity)."""
    kept = _dedupe(entities)
    names = {normalize_name(e.name) for e in kept}
    by_key: dict[str, str] = {}
    for entity in kept:
        by_key.setdefault(entity_key(entity.name, "range" if entity.kind == "range" else None), entity.name)

    def end(name: str) -> str:
        return name if normalize_name(name) in names else by_key.get(entity_key(name), name)

    fixed = [
        ExtractedRelation(subject=end(r.subject), relation=r.relation, object=end(r.object))
        for r in relations
    ]
    return ChunkExtraction(
        entities=kept, relations=list(dict.fromkeys(r for r in fixed if r.subject != r.object))
    )


def _dedupe(entities: Iterable[ExtractedEntity]) -> list[ExtractedEntity]:
    seen: dict[tuple[str, str], ExtractedEntity] = {}
    for entity in entities:
        seen.setdefault(entity.key, entity)
    return list(seen.values())


def _sentence_relations(
    sentence: str, topic: ExtractedEntity | None
) -> tuple[_Found, list[ExtractedRelation]]:
    # what a parenthesis names is an alias or an aside (:func:`_aliases`), never the sentence's subject
    blanked = re.sub(r"\([^)]*\)", lambda m: " " * len(m.group()), sentence) if "(" in sentence else sentence
    found = _find(blanked)
    if blanked is not sentence:
        for match in re.finditer(r"\(([^)]*)\)", sentence):
            for position, entity in _find(match.group(1)).items:
                if entity.kind not in ("product", "family"):
                    found.add(match.start(1) + position, entity)
    relations: list[ExtractedRelation] = []

    def rel(subject: ExtractedEntity, relation: RelationType, obj: ExtractedEntity) -> None:
        if subject.key != obj.key:
            relations.append(ExtractedRelation(subject=subject.name, relation=relation, object=obj.name))

    products, families = found.of("product"), found.of("family")
    materials, fluids, ranges = found.of("material"), found.of("fluid"), found.of("range")
    subjects = products + families or materials
    if not subjects and topic is not None and (ranges or fluids):
        subjects = [topic]
        found.add(-1, topic)
    if (
        not products + families
        and materials
        and topic is not None
        and topic.kind in ("product", "family")
        and (_PART_WORDS.search(sentence) or _labelled(found))
    ):
        # "Seat options: PTFE or TFM" in the BV-40's specification: the parts of the document's subject
        found.add(-1, topic)
        products, families = ([topic], []) if topic.kind == "product" else ([], [topic])
    if fluids:
        relation: RelationType | None = None
        if _NEGATIVE.search(sentence):
            relation = "incompatible_with"
        elif _POSITIVE.search(sentence):
            relation = "compatible_with"
        if relation is not None:
            for subject in materials or subjects:
                for fluid in fluids:
                    rel(subject, relation, fluid)
    for subject in subjects:
        for value in ranges:
            rel(subject, "rated_for", value)
    for standard in found.of("standard"):
        for subject in products + families:
            rel(subject, "rated_for", standard)
    if (
        materials
        and (products or families)
        and (_PART_WORDS.search(sentence) or _described_as(found) or _labelled(found))
    ):
        owners = products + families
        if topic is not None and any(entity_key(e.name) == entity_key(topic.name) for e in owners):
            owners = [topic]  # "XR-13 valves share the XR-12 body with a KLM seat": the document's series
        for subject in owners:
            for material in materials:
                rel(subject, "made_of", material)
    for family in families:
        for product in products:
            rel(product, "belongs_to_family", family)
    ordered = [e for _, e in sorted(found.items, key=lambda item: item[0]) if e.kind in ("product", "family")]
    for cue, forward in ((_REPLACES, True), (_REPLACED_BY, False)):
        match = cue.search(sentence)
        if match and len(ordered) >= 2:
            before = [e for p, e in found.items if p < match.start() and e.kind in ("product", "family")]
            after = [e for p, e in found.items if p > match.start() and e.kind in ("product", "family")]
            if before and after:
                new, old = (before[-1], after[0]) if forward else (after[0], before[-1])
                rel(new, "replaces", old)
    match = _EQUIVALENT.search(sentence)
    if match:
        before = [e for p, e in found.items if p < match.start() and e.kind != "range"]
        after = [e for p, e in found.items if p > match.start() and e.kind != "range"]
        if before and after:
            rel(before[-1], "equivalent_of", after[0])
    owners = found.of("product", "family")
    if not owners and topic is not None and topic.kind in ("product", "family"):
        owners = [topic]
    if owners:
        components = _components(blanked)
        if components and owners[0] is topic and all(e is not topic for _, e in found.items):
            found.add(-1, topic)
        for position, component in components:
            found.add(position, component)
            for owner in owners:
                rel(owner, "made_of", component)
    return found, relations


_COMPOSITION = re.compile(
    r"\b(?:(?:[a-z]+ed|made|built|set|cast|spun|woven|sewn|knit)\s+(?:from|with|of)|consists?\s+of|consisting\s+of|composed\s+of|contains?|comprises"
    r"|comprising)\s+|:\s+(?=[^.;]*(?:,|\band\b|\bor\b))",
    re.I,
)
"""Where a list of what something is made of starts: ``made from``, ``coated with``, ``consists of``,
``contains``, or a colon before a list (``Ingredients: a, b and c``, ``Sheath options: X or Y``)."""
_ITEM_LEAD = re.compile(r"^(?:(?:with|of|from|and|or|a|an|the|its|their|our|some|plus)\s+)+", re.I)
_ITEM_END = re.compile(
    r"\s+(?:for|as|on|over|under|in|at|to|from|that|which|where|when|by|per|into|inside|outside|instead)\b.*$",
    re.I,
)
_ITEM_STOP = re.compile(
    r"\b(?:is|are|was|were|be|has|have|had|can|may|will|must|not|no|one|two|three|four|both|each|all|any|other"
    r"|this|these|those|it|they|we|you|see|e\.g|i\.e|etc|options?|version|versions)\b",
    re.I,
)
_ITEM_WORDS = re.compile(r"^[^\W\d_][\w'’-]*(?: [^\W\d_][\w'’-]*){0,3}$")


def _components(sentence: str) -> list[tuple[int, ExtractedEntity]]:
    """What a sentence lists as something's components or options, with their positions.

    After a cue (:data:`_COMPOSITION`), up to the next cue or the sentence's end: the items between
    commas, *and* and *or*, each cut at its first preposition (``PUR for oil``: PUR; the pieces after
    it, up to one that starts with *or* or *and*, belong to that phrase), after its last
    number (``type 550 wheat flour``: wheat flour) and after *of* (``a topping of sesame seeds``),
    kept when one to four words without a verb, a pronoun or a number word. A parenthesis is blanked
    by the caller. A name in the lexicon is its canonical entity; any other is a material.
    """
    found: list[tuple[int, ExtractedEntity]] = []
    # a title's colon introduces its description ("# PV-9: PVA gloves for solvents"), not a list
    title = sentence.lstrip().startswith("#")
    cues = [cue for cue in _COMPOSITION.finditer(sentence) if not (title and cue.group().startswith(":"))]
    for index, cue in enumerate(cues):
        end = cues[index + 1].start() if index + 1 < len(cues) else len(sentence)
        if (
            end < len(sentence)
            and cues[index + 1].group().startswith(":")
            and not re.search(r"[,;]", sentence[cue.end() : end])
        ):
            continue  # "Construction: tube: UHMWPE, white": "tube" labels the list that follows
        tail = False  # in "EPDM for acids, alkalis and hot water, or FKM", the pieces after "for"
        for piece in re.split(r"[,;]", sentence[cue.end() : end].split(". ")[0]):
            # "Construction: tube: UHMWPE, white": a label inside the list names a part, not a component
            piece = " ".join(piece.split()).strip(" .:!?").rsplit(": ", 1)[-1]
            if _VALUE.search(piece):
                tail = False
                continue  # "steam up to 130 °C for 30 minutes": a condition with a quantity, no component
            if tail and not re.match(r"(?:or|and)\b", piece, re.I):
                continue
            cut = _ITEM_END.sub("", _ITEM_LEAD.sub("", piece))
            tail = cut != _ITEM_LEAD.sub("", piece)
            piece = cut
            for raw in re.split(r"\s+(?:and|or|and/or|&)\s+", piece):
                if (entity := _item(raw)) is not None:
                    found.append((cue.start(), entity))
    return found


def _item(raw: str) -> ExtractedEntity | None:
    """One listed component (:func:`_components`): after its last number and after *of*; ``None``
    unless one to four words without a verb, a pronoun, a number word or a rating."""
    words = _ITEM_LEAD.sub("", raw).split()
    numbered = [i for i, word in enumerate(words) if _DIGIT.search(word)]
    words = words[numbered[-1] + 1 :] if numbered else words
    if " of " in f" {' '.join(words)} ":
        words = " ".join(words).rsplit(" of ", 1)[-1].split()
    item = _ITEM_LEAD.sub("", " ".join(words)).strip(" .-")
    if (
        not _ITEM_WORDS.match(item)
        or _ITEM_STOP.search(item)
        or item.lower() in _NOT_CODE_WORDS
        or _is_rating(item)
        or (" " not in item and item.lower().endswith(("ed", "ing")))  # "limited by", "cleaning in place"
    ):
        return None
    return _lexicon_entity(item) or ExtractedEntity(name=item, kind="material")


def _listed(line: str) -> ExtractedEntity | None:
    """The component a list item under a line ending in a colon names: its first words, up to a
    comma, a parenthesis or a preposition (``- agave syrup (suffix -V)``: agave syrup)."""
    first = re.split(r"[,;:(]", _LIST_ITEM.sub("", line.strip()), maxsplit=1)[0]
    if _CODE.search(first) or _SPACED_CODE.search(first):
        return None  # "- BT-14 plain butyl, for ketones": a variant of a product, not a component
    return _item(_ITEM_END.sub("", _ITEM_LEAD.sub("", first.strip(" .!?"))))


def _heading_name(heading: str) -> ExtractedEntity | None:
    """What a heading that names no known entity is about: ``## Soy lecithin``, ``# Ingredient
    specification: cocoa butter`` (a title's kind before its colon), ``## Shellac (E904)``; ``None``
    for a level-one title without a colon (``# Frequently asked questions``) and for a phrase
    (a preposition, *of*, *and*, a gerund: ``# Guide: replacing seats``, ``# Glossary of media``)."""
    text = heading.strip()
    level = len(text) - len(text.lstrip("#"))
    text = re.sub(r"\([^)]*\)", " ", text.lstrip("# "))
    if level == 1 and ": " not in text:
        return None
    name = " ".join(text.split(": ")[-1].split()).strip(" .")
    words = name.split()
    if (
        not 1 <= len(words) <= 4
        or not _ITEM_WORDS.match(name)
        or _ITEM_STOP.search(name)
        or _ITEM_END.search(f" {name}")
        or re.search(r"\b(?:of|and|or|with)\b", name, re.I)
        or words[0].lower().endswith("ing")
    ):
        return None
    return _lexicon_entity(name) or ExtractedEntity(name=name, kind="material")


def _labelled(found: _Found) -> bool:
    """Whether a sentence gives its materials as a label's value: ``Tube and cover: soft PVC``,
    ``# PT-6 series: PTFE hose``, ``Lining: UHMWPE`` (a colon, the materials after it and none before
    it), the way a specification names what each part of its product is."""
    colon = found.text.find(": ")
    materials = [p for p, e in found.items if e.kind == "material"]
    return colon > 0 and bool(materials) and min(materials) > colon


def _described_as(found: _Found) -> bool:
    """Whether a sentence says what its product is with one material: ``GX-20 gloves are thin,
    unsupported nitrile gloves`` (the product, then *is*/*are*, then the sentence's only material)."""
    items = sorted(found.items, key=lambda item: item[0])
    owners = [p for p, e in items if e.kind in ("product", "family")]
    materials = [p for p, e in items if e.kind == "material"]
    return (
        len(materials) == 1
        and bool(owners)
        and owners[0] < materials[0]
        and found.copula_between(owners[0], materials[0])
    )


def parse_row(text: str) -> list[tuple[str, str]]:
    """``"SKU: AB-1; Price: 3,50"`` → ``[("SKU", "AB-1"), ("Price", "3,50")]`` (a cell without header: ``("", v)``)."""
    cells = []
    for part in text.split("; "):
        header, sep, value = part.partition(": ")
        cells.append((header.strip(), value.strip()) if sep else ("", part.strip()))
    return cells


def _cell_entity(value: str, default: EntityKind) -> ExtractedEntity | None:
    """The entity a table cell names: a lexicon word, a code, or (short text) ``default``; a
    concentration and a parenthesis are left out (``Sulfuric acid 98%`` is sulfuric acid,
    ``Hydrolysis (hot water)`` hydrolysis, the parenthesis its alias: :func:`_row_extraction`)."""
    value = _PERCENT_TAIL.sub("", re.sub(r"\s*\([^)]*\)", "", _normalize_text(value))).strip()
    if not value or len(value) > 60:
        return None
    lexicon = _LEXICON.get(value.lower())
    if lexicon is not None:
        return ExtractedEntity(name=lexicon[1], kind=lexicon[0])
    if default in ("product", "family") or _CODE.fullmatch(value):
        return ExtractedEntity(name=value, kind=default if default in ("product", "family") else "product")
    if default in ("material", "fluid") and len(value.split()) <= 4:
        return ExtractedEntity(name=value, kind=default)
    return None


def _column_entity(header: str, subject: ExtractedEntity) -> ExtractedEntity | None:
    """The thing a wide table's column rates, named by its header (``UHMWPE``, ``Glass fibre``):
    a material when the row's subject is a fluid, else a fluid; ``None`` for a header that is a
    table's own vocabulary (rating, status, temperature, series...), holds a number or a unit, or
    is longer than three words."""
    name = _term(re.sub(r"\s*\([^)]*\)", "", header))
    if (
        name is None
        or len(name.split()) > 3
        or _DIGIT.search(name)
        or re.search(rf"(?<!\w){_UNIT}(?!\w)", name)
        or any(
            rule.search(name)
            for rule in (_H_FAMILY, _H_MATERIAL, _H_FLUID, _H_COMPAT, _H_RATED, _H_STANDARD, _H_EQUIVALENT)
        )
    ):
        return None
    return _cell_entity(name, "material" if subject.kind == "fluid" else "fluid")


def _extended_name(entity: ExtractedEntity) -> ExtractedEntity | None:
    """The known thing a table cell names with one more word: ``Diesel fuel`` (diesel),
    ``Sodium hydroxide solution`` (sodium hydroxide): the words but the last are a lexicon name of
    the same kind and the last word is none; ``None`` otherwise."""
    words = entity.name.split()
    if len(words) < 2 or _LEXICON.get(words[-1].lower()) is not None or not words[-1].isalpha():
        return None
    known = _lexicon_entity(" ".join(words[:-1]))
    return known if known is not None and known.kind == entity.kind else None


def _header_unit(header: str) -> str | None:
    match = re.search(_UNIT, _normalize_text(header), re.I)
    return _unit(match.group(1)) if match else None


def _row_extraction(text: str, keys: Mapping[str, Any]) -> ChunkExtraction | None:
    """The extraction of one table row (``None`` when the row has no usable subject)."""
    cells = [(h, _normalize_text(v)) for h, v in parse_row(text)]
    if not cells:
        return None
    entities: list[ExtractedEntity] = []
    relations: list[ExtractedRelation] = []
    first_header, first_value = next(iter(keys.items())) if keys else cells[0]
    subject_kind: EntityKind = "family" if _H_FAMILY.search(first_header) else "product"
    if _H_MATERIAL.search(first_header):
        subject_kind = "material"
    if _H_FLUID.search(first_header):
        subject_kind = "fluid"
    subject = _cell_entity(str(first_value), subject_kind)
    if subject is None:
        return None
    entities.append(subject)
    if (known := _extended_name(subject)) is not None:
        entities.append(known)  # "Diesel fuel" is diesel, "Sodium hydroxide solution" sodium hydroxide
        relations.append(ExtractedRelation(subject=subject.name, relation="equivalent_of", object=known.name))
    materials, fluids, rating = [], [], None
    verdict: RelationType | None = None  # a long-form row's verdict on its subject and another name
    others: list[ExtractedEntity] = []  # names in columns no rule reads ("Allergen or diet: Soy")

    def rel(a: ExtractedEntity, relation: RelationType, b: ExtractedEntity) -> None:
        entities.append(b)
        if a.key != b.key:
            relations.append(ExtractedRelation(subject=a.name, relation=relation, object=b.name))

    # a wide table rates one thing per column ("Chemical: Acetone; NBR: X; CSM: C"): a column whose
    # header is a short name and whose cell is a rating names the other side of the compatibility,
    # when the row has at least two such columns (one rating cell is a long-form row's verdict)
    rated_columns = {
        header: column
        for header, value in cells
        if header != first_header
        and _is_rating(value)
        and len(value.split()) <= 2
        and (column := _column_entity(header, subject)) is not None
    }
    if len(rated_columns) < 2:
        rated_columns = {}
    for header, value in cells:
        if not value or (header == first_header and value == str(first_value)):
            continue
        lexicon_header = _LEXICON.get(header.lower())
        if lexicon_header is None and header in rated_columns:
            lexicon_header = (rated_columns[header].kind, rated_columns[header].name)
        if lexicon_header is not None and (_RATING_POSITIVE.match(value) or _RATING_NEGATIVE.match(value)):
            other = ExtractedEntity(name=lexicon_header[1], kind=lexicon_header[0])
            positive = bool(_RATING_POSITIVE.match(value)) and not _RATING_NEGATIVE.match(value)
            relation: RelationType = "compatible_with" if positive else "incompatible_with"
            if subject.kind == "fluid":  # the subject of a compatibility is the material
                entities.append(other)
                relations.append(
                    ExtractedRelation(subject=other.name, relation=relation, object=subject.name)
                )
            else:
                rel(subject, relation, other)
        elif _H_FAMILY.search(header):
            if (family := _cell_entity(value, "family")) is not None:
                rel(subject, "belongs_to_family", family)
        elif _H_REPLACED_BY.search(header):
            if (new := _cell_entity(value, "product")) is not None:
                entities.append(new)
                relations.append(
                    ExtractedRelation(subject=new.name, relation="replaces", object=subject.name)
                )
        elif _H_REPLACES.search(header):
            if (old := _cell_entity(value, "product")) is not None:
                rel(subject, "replaces", old)
        elif _H_EQUIVALENT.search(header):
            if (same := _cell_entity(value, subject.kind)) is not None:
                rel(subject, "equivalent_of", same)
        elif _H_STANDARD.search(header):
            for match in _STANDARD.finditer(value):
                rel(
                    subject,
                    "rated_for",
                    ExtractedEntity(name=" ".join(match.group(1).split()), kind="standard"),
                )
        elif _H_FLUID.search(header):
            if (fluid := _cell_entity(value, "fluid")) is not None:
                fluids.append(fluid)
                entities.append(fluid)
        elif _H_COMPAT.search(header) and (_CONTAINS.match(value) or _ABSENT.match(value)):
            verdict = "made_of" if _CONTAINS.match(value) else "compatible_with"
        elif _H_COMPAT.search(header) and (_RATING_POSITIVE.match(value) or _RATING_NEGATIVE.match(value)):
            rating = bool(_RATING_POSITIVE.match(value)) and not _RATING_NEGATIVE.match(value)
            verdict = "compatible_with" if rating else "incompatible_with"
        elif _H_MATERIAL.search(header):
            if (material := _cell_entity(value, "material")) is not None:
                if subject.kind == "fluid":
                    materials.append(material)
                    entities.append(material)
                else:
                    materials.append(material)
                    rel(subject, "made_of", material)
        elif _H_RATED.search(header):
            unit = _header_unit(header)
            found = _find(value if unit is None or _VALUE.search(value) else f"{value} {unit}")
            # a bare value is a bound or a point by its header ("Max temp (°C)": at most)
            values = [e for e in found.of("range") if e.low is None or e.low != e.high]
            if not values and unit is not None:
                numbers = re.findall(_NUMBER, value)
                if len(numbers) == 1:
                    number = _number(numbers[0])
                    at_least = bool(re.search(r"\bmin", header, re.I))
                    values = [range_entity(number if at_least else None, None if at_least else number, unit)]
            for value_entity in values:
                rel(subject, "rated_for", value_entity)
        else:
            for _, entity in _find(value).items:
                if entity.kind != "range":
                    entities.append(entity)
            if not _DIGIT.search(value) and (other := _cell_entity(value, "fluid")) is not None:
                others.append(other)
    for _, value in cells:  # "Hydrolysis (hot water)": the parenthesis names the same thing
        inside = re.search(r"\(([^()]+)\)", value)
        base = _cell_entity(value, "fluid") if inside else None
        if inside is None or base is None:
            continue
        base_key = entity_key(base.name)
        named = next((e for e in entities if e.kind != "range" and entity_key(e.name) == base_key), None)
        alias = _term(inside.group(1))
        if named is not None and alias is not None and entity_key(alias) != base_key:
            entities.append(_term_entity(alias, named))
            relations.append(ExtractedRelation(subject=named.name, relation="equivalent_of", object=alias))
    if rating is not None:
        left = [subject] if subject.kind in ("material", "product", "family") else materials
        right = fluids if subject.kind != "fluid" else [subject]
        for a in left:
            for b in right:
                relations.append(
                    ExtractedRelation(
                        subject=a.name,
                        relation="compatible_with" if rating else "incompatible_with",
                        object=b.name,
                    )
                )
    if verdict is not None and not fluids and not materials and subject.kind != "fluid":
        # a long-form row of columns no rule names ("Ingredient: Soy lecithin; Allergen or diet: Soy;
        # Status: contains"): the verdict links its subject and the other names; a subject that is
        # not a code is the thing the table rates, a material, not a product
        if subject.kind == "product" and subject_kind == "product" and not _CODE.fullmatch(subject.name):
            entities = [e for e in entities if e is not subject]
            subject = ExtractedEntity(name=subject.name, kind="material")
            entities.insert(0, subject)
        for other in others:
            rel(subject, verdict, other)
    return _chunk_extraction(entities, relations)


def extract_chunk(
    text: str, attributes: Mapping[str, Any] | None = None, *, topic: ExtractedEntity | None = None
) -> ChunkExtraction:
    """Entities and relations of one chunk.

    Args:
        text: the chunk's text.
        attributes: the chunk's ``attributes``; a table row (``keys`` present) is read as a row.
        topic: the document's first subject (product, family or material), used for a sentence
            that states a range or a fluid without naming its subject.
    """
    return _extract_chunk(text, attributes, topic)[0]


_LIST_ITEM = re.compile(r"^(?:[-*•|]\s|\d+[.)]\s)")


def _lines(text: str) -> list[str]:
    """The text's headings, list items and paragraphs, each on one line: a paragraph wrapped over
    several lines is one line (a glossary entry or a sentence is not cut where the editor wrapped it)."""
    lines: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        current: list[str] = []
        for raw in paragraph.split("\n"):
            line = raw.strip()
            if not line:
                continue
            if line.startswith("#") or _LIST_ITEM.match(line):
                if current:
                    lines.append(" ".join(current))
                current = []
                if line.startswith("#"):
                    lines.append(line)
                    continue
            current.append(line)
        if current:
            lines.append(" ".join(current))
    return lines


def _is_heading(line: str) -> bool:
    """A Markdown heading, or a short line without a full stop (a title in text and PDF)."""
    stripped = line.strip()
    return stripped.startswith("#") or (
        0 < len(stripped.split()) <= 10 and not stripped.endswith((".", ":", ";", ",", "?", "!"))
    )


def _extract_chunk(
    text: str, attributes: Mapping[str, Any] | None, topic: ExtractedEntity | None
) -> tuple[ChunkExtraction, ExtractedEntity | None]:
    """:func:`extract_chunk`, and the topic in force at its end (a heading changes it)."""
    text = _normalize_text(text)
    keys = (attributes or {}).get("keys")
    if keys is not None:
        row = _row_extraction(text, keys)
        if row is not None:
            return row, topic
    entities: list[ExtractedEntity] = []
    relations: list[ExtractedRelation] = []
    chunk_topic = topic
    glossary = _GLOSSARY.search(text) is not None
    listing = False  # the line before ends with a colon: its list items are components or options
    for line in _lines(text):
        heading = _is_heading(line)
        if (
            listing
            and _LIST_ITEM.match(line)
            and chunk_topic is not None
            and chunk_topic.kind in ("product", "family")
        ):
            if (component := _listed(line)) is not None:
                entities.extend((chunk_topic, component))
                relations.append(
                    ExtractedRelation(subject=chunk_topic.name, relation="made_of", object=component.name)
                )
        else:
            listing = line.rstrip().endswith(":")
        for sentence in _SENTENCES.split(line):
            if not sentence.strip():
                continue
            found, sentence_relations = _sentence_relations(sentence, chunk_topic)
            entities.extend(e for _, e in found.items)
            relations.extend(sentence_relations)
            named, same = _aliases(sentence, glossary, heading and line.startswith("#"))
            entities.extend(named)
            relations.extend(same)
            if heading:  # what a heading explains in a parenthesis is not its subject
                found_outside = _find(re.sub(r"\([^)]*\)", " ", sentence))
                subjects = found_outside.of("product", "family") or found_outside.of("material")
                if not subjects and line.startswith("#") and (named_by := _heading_name(sentence)):
                    subjects = [named_by]
                    entities.append(named_by)
            else:
                subjects = found.of("product", "family") or found.of("material")
            if subjects and (heading or chunk_topic is None or chunk_topic is topic):
                # a heading names what follows ("## TFM", the second material of a data sheet)
                chunk_topic = subjects[0]
    return _chunk_extraction(entities, relations), chunk_topic


def extract_document(chunks: Sequence[tuple[str, Mapping[str, Any] | None]]) -> list[ChunkExtraction]:
    """:func:`extract_chunk` for each ``(text, attributes)`` of one document, in order.

    The document's topic (its first product, family or material, or the one its last heading names)
    carries over to later chunks.
    A part number that the document also names as a family (``V200 series``) is that family.
    """
    topic: ExtractedEntity | None = None
    results = []
    for text, attributes in chunks:
        extraction, last = _extract_chunk(text, attributes, topic)
        if not (attributes or {}).get("keys"):
            topic = last
        results.append(extraction)
    families = {normalize_name(e.name) for x in results for e in x.entities if e.kind == "family"}
    if not families:
        return results
    fixed = []
    for extraction in results:
        entities = [
            ExtractedEntity(name=e.name, kind="family")
            if e.kind == "product" and normalize_name(e.name) in families
            else e
            for e in extraction.entities
        ]
        fixed.append(ChunkExtraction(entities=_dedupe(entities), relations=extraction.relations))
    return fixed


def question_names(question: str, *, max_words: int = 4) -> list[str]:
    """Names a question may use for entities: every run of 1-``max_words`` words and code, plus the
    canonical names of the lexicon words and patterns it contains (``Teflon`` → ``ptfe``,
    ``chlorine-based`` → ``chlorine``), each as :func:`normalize_name` and as
    :func:`~switchboard.knowledge.graph.schema.entity_key` (``BV 40`` → ``bv40``, which is also how
    ``BV-40`` is stored). The graph walk seeds from the tenant's entities whose key is among them."""
    text = _normalize_text(question)
    names: dict[str, None] = {}
    for _, entity in _find(text).items:
        if entity.kind != "range":
            names.setdefault(normalize_name(entity.name), None)
            names.setdefault(entity_key(entity.name), None)
    words = re.findall(r"[\w][\w./-]*[\w]|[\w]", text)
    for size in range(1, max_words + 1):
        for start in range(len(words) - size + 1):
            run = " ".join(words[start : start + size])
            names.setdefault(normalize_name(run), None)
            names.setdefault(entity_key(run), None)
    return [name for name in names if name]


def question_units(question: str) -> list[str]:
    """Units of the values a question states (``180 °C`` → ``["°C"]``): ranges in those units weigh more."""
    return sorted({_unit(m.group(2)) for m in _VALUE.finditer(_normalize_text(question))})


_CUES: tuple[tuple[re.Pattern[str], tuple[RelationType, ...]], ...] = (
    (
        re.compile(r"\b(compatib\w*|resist\w*|suitab\w*|handle|chemical|attack|use[ds]? with)\b", re.I),
        ("compatible_with", "incompatible_with"),
    ),
    (
        re.compile(r"\b(temperature|pressure|rated|rating|max\w*|min\w*|range|hot|cold|°|bar|psi)\b", re.I),
        ("rated_for",),
    ),
    (re.compile(r"\b(replace\w*|supersede\w*|successor|newer|older|discontinued)\b", re.I), ("replaces",)),
    (re.compile(r"\b(equivalent|same as|alternative|interchangeable|instead)\b", re.I), ("equivalent_of",)),
    (re.compile(r"\b(series|family|belongs?)\b", re.I), ("belongs_to_family",)),
    (re.compile(r"\b(made|material|seat|seal|body|lining|gasket)\b", re.I), ("made_of",)),
)


_PART_QUESTION = re.compile(
    r"\b(seats?|seals?|body|bodies|disc|liners?|lining|diaphragms?|sheaths?|jackets?|insulation|wedge|coating"
    r"|conductors?|gaskets?|o-rings?|housing|materials?|made of|elastomers?|rubber|options?)\b",
    re.I,
)


def asks_about_a_part(question: str) -> bool:
    """Whether the question asks about a part of something it names ("the body material of the
    GV-200", "its seat"): the answer is then one relation away from what it names."""
    return _PART_QUESTION.search(question) is not None


def relation_cues(question: str) -> list[str]:
    """Relation types the question's words ask about (``compatible`` → compatibility relations)."""
    cued: dict[str, None] = {}
    if question_units(question):
        cued["rated_for"] = None
    for pattern, relations in _CUES:
        if pattern.search(question):
            for relation in relations:
                cued.setdefault(relation, None)
    return list(cued)

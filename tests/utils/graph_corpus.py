"""A valve maker's documents whose answers span 2-3 of them, and questions with their supporting chunks.

Used by ``tests/knowledge/test_graph*.py`` and ``loadtests/kb_graph_benchmark.py``. Three kinds of
document with no shared vocabulary: material property sheets (a material's temperature
limits, never naming a valve), a chemical compatibility table (material × fluid ratings, one chunk
per row), and valve series specs (seat material and operating range, never naming a fluid); plus a
parts list (part → series, price), a replacements table and a plain FAQ (no entities at all).

A supporting chunk is named by a ``(filename, marker)`` pair: the chunk of that document whose
text contains the marker (documents are small, so each prose file is one chunk).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

MATERIALS = {
    # material: (min °C, max °C, a property sentence)
    "PTFE": (-200, 260, "Very low friction and almost universal chemical inertness."),
    "EPDM": (-40, 150, "Good resistance to weathering and hot water; swells in mineral oil."),
    "FKM": (-20, 200, "Fluoroelastomer with good resistance to fuels and oils."),
    "PVDF": (-30, 140, "Tough fluoropolymer, easy to weld, for piping and linings."),
    "NBR": (-30, 100, "Nitrile rubber for oils and fuels at moderate temperatures."),
}
SERIES = {
    # series: (seat material, min °C, max °C, body, duty)
    "V200": ("PTFE", -20, 200, "stainless steel 316", "chemical process lines"),
    "V300": ("EPDM", -10, 120, "ductile iron", "water treatment and HVAC"),
    "K400": ("FKM", -15, 180, "brass", "fuel and lubricant service"),
    "P600": ("PVDF", -20, 120, "PVC", "dosing and chlorination skids"),
    "H700": ("NBR", -20, 90, "carbon steel", "hydraulic and oil lines"),
}
FLUIDS = ("chlorine", "ammonia", "steam", "sulfuric acid", "ozone")
RATINGS = {
    # (material, fluid): rating A (excellent) .. D (not recommended)
    ("PTFE", "chlorine"): "A",
    ("PTFE", "ammonia"): "A",
    ("PTFE", "steam"): "A",
    ("PTFE", "sulfuric acid"): "A",
    ("PTFE", "ozone"): "A",
    ("EPDM", "chlorine"): "D",
    ("EPDM", "ammonia"): "A",
    ("EPDM", "steam"): "A",
    ("EPDM", "sulfuric acid"): "C",
    ("EPDM", "ozone"): "A",
    ("FKM", "chlorine"): "A",
    ("FKM", "ammonia"): "D",
    ("FKM", "steam"): "C",
    ("FKM", "sulfuric acid"): "A",
    ("FKM", "ozone"): "A",
    ("PVDF", "chlorine"): "A",
    ("PVDF", "ammonia"): "B",
    ("PVDF", "steam"): "C",
    ("PVDF", "sulfuric acid"): "A",
    ("PVDF", "ozone"): "A",
    ("NBR", "chlorine"): "D",
    ("NBR", "ammonia"): "B",
    ("NBR", "steam"): "D",
    ("NBR", "sulfuric acid"): "D",
    ("NBR", "ozone"): "D",
}
SIZES = ("015", "025", "040", "050")
FAQ = {
    "returns-policy.txt": "Returns are accepted within 30 days of delivery when the goods are unused and "
    "in their original packaging. Refunds are paid to the original payment method within 5 working days.",
    "delivery.txt": "Orders placed before 2 pm ship the same working day. Standard delivery takes 2 to 4 "
    "working days; express courier delivery next day is available at checkout for an extra charge.",
    "support-hours.txt": "Our technical support desk answers by telephone and e-mail Monday to Friday "
    "from 8 am to 6 pm. Outside these hours leave a message and an engineer calls back.",
}


def _csv(rows: list[list[str]]) -> bytes:
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue().encode()


def material_sheet(material: str) -> str:
    low, high, remark = MATERIALS[material]
    return (
        f"{material} material property sheet.\n\n{remark} "
        f"Maximum continuous service temperature: {high} °C. "
        f"Minimum service temperature: {low} °C. Density and hardness values are given per grade."
    )


def series_spec(series: str) -> str:
    seat, low, high, body, duty = SERIES[series]
    return (
        f"{series} series ball valves for {duty}.\n\n"
        f"The {series} series valves have a {body} body and {seat} seats. "
        f"Operating temperature range: {low} to {high} °C. Maximum pressure 16 bar. "
        f"Sizes DN15 to DN50, flanged to EN 1092-1."
    )


def documents() -> dict[str, bytes]:
    """Filename → bytes of every document of the corpus."""
    docs: dict[str, bytes] = {}
    for material in MATERIALS:
        docs[f"{material.lower()}-properties.txt"] = material_sheet(material).encode()
    for series in SERIES:
        docs[f"{series.lower()}-series.txt"] = series_spec(series).encode()
    docs["chemical-compatibility.csv"] = _csv(
        [["Material", "Fluid", "Rating"]]
        + [[material, fluid, RATINGS[material, fluid]] for material in MATERIALS for fluid in FLUIDS]
    )
    docs["parts.csv"] = _csv(
        [["Part number", "Series", "Size", "Price EUR"]]
        + [
            [f"{series}-{size}", series, f"DN{int(size)}", f"{40 + 10 * index + int(size)}.00"]
            for index, series in enumerate(SERIES)
            for size in SIZES
        ]
    )
    docs["replacements.csv"] = _csv(
        [["Old part", "Replaced by", "Note"]]
        + [
            [f"{series[0]}100-{size}", f"{series}-{size}", "same face-to-face"]
            for series in ("V200",)
            for size in SIZES
        ]
    )
    docs.update({name: text.encode() for name, text in FAQ.items()})
    return docs


@dataclass(frozen=True)
class Question:
    text: str
    kind: str
    """``multi_hop``, ``single_hop`` or ``exact_sku``."""
    support: tuple[tuple[str, str], ...]
    """``(filename, marker)`` of each supporting chunk."""


def _row(material: str, fluid: str) -> tuple[str, str]:
    return ("chemical-compatibility.csv", f"Material: {material}; Fluid: {fluid};")


def questions() -> list[Question]:
    """50 multi-hop, 20 single-hop and 20 exact-SKU questions with their supporting chunks."""
    found: list[Question] = []
    for series, (seat, _, high, _, _) in SERIES.items():
        for fluid in FLUIDS:
            temperature = high - 20
            support = (
                (f"{series.lower()}-series.txt", "Operating temperature"),
                _row(seat, fluid),
                (f"{seat.lower()}-properties.txt", "Maximum continuous"),
            )
            found.append(
                Question(
                    f"Can the {series} valve be used with {fluid} at {temperature} °C?", "multi_hop", support
                )
            )
            found.append(
                Question(
                    f"Is a {seat} seat compatible with a {fluid}-based fluid at {temperature} °C?",
                    "multi_hop",
                    support,
                )
            )
    for material in MATERIALS:
        found.append(
            Question(
                f"What is the maximum service temperature of {material}?",
                "single_hop",
                ((f"{material.lower()}-properties.txt", "Maximum continuous"),),
            )
        )
    for series in SERIES:
        found.append(
            Question(
                f"What is the operating temperature range of the {series} series?",
                "single_hop",
                ((f"{series.lower()}-series.txt", "Operating temperature"),),
            )
        )
    for material, fluid in (
        ("EPDM", "ozone"),
        ("FKM", "ammonia"),
        ("NBR", "steam"),
        ("PVDF", "chlorine"),
        ("PTFE", "sulfuric acid"),
    ):
        found.append(Question(f"How does {material} resist {fluid}?", "single_hop", (_row(material, fluid),)))
    found += [
        Question(
            "How many days do I have to return goods?", "single_hop", (("returns-policy.txt", "30 days"),)
        ),
        Question("When does an order placed before 2 pm ship?", "single_hop", (("delivery.txt", "2 pm"),)),
        Question(
            "What are the support desk telephone hours?", "single_hop", (("support-hours.txt", "8 am"),)
        ),
        Question(
            "How long does standard delivery take?", "single_hop", (("delivery.txt", "Standard delivery"),)
        ),
        Question(
            "Are refunds paid to the original payment method?",
            "single_hop",
            (("returns-policy.txt", "Refunds"),),
        ),
    ]
    for series in SERIES:
        for size in SIZES:
            found.append(
                Question(f"{series}-{size}", "exact_sku", (("parts.csv", f"Part number: {series}-{size};"),))
            )
    return found

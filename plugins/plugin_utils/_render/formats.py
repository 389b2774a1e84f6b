# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The file formats of the fleet report: name -> (file name, renderer). Each renderer yields text pieces.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Callable

from ansible_collections.continuum.hydra.plugins.plugin_utils._render import html, json_report, junit, markdown, prometheus

Renderer = Callable[[Mapping[str, Any]], Iterator[str]]

REPORT_NAME = "fleet-report"
FORMATS: tuple[tuple[str, str, Renderer], ...] = (
    ("json", REPORT_NAME + ".json", json_report.render),
    ("markdown", REPORT_NAME + ".md", markdown.render),
    ("html", REPORT_NAME + ".html", html.render),
    ("junit", REPORT_NAME + ".junit.xml", junit.render),
    ("prometheus", REPORT_NAME + ".prom", prometheus.render),
)
FORMAT_NAMES = tuple(name for name, _file_name, _renderer in FORMATS)


def unknown_formats(names: Iterable[str]) -> list[str]:
    return [n for n in names if n not in FORMAT_NAMES]


def selected(names: Iterable[str]) -> list[tuple[str, str, Renderer]]:
    """(name, file name, renderer) of the chosen formats, in the catalogue's order."""
    wanted = set(names)
    return [f for f in FORMATS if f[0] in wanted]

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The file formats of the fleet report: name -> (file name, renderer). Each renderer yields text pieces.

write_file() writes every file of the report (its formats, perf.csv, evidence, a slice's part, the batch plan):
atomically, a failure one warning line that costs no other file.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import datetime
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Callable

from ansible_collections.continuum.hydra.plugins.module_utils._atomic import write_atomic
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import html, json_report, junit, markdown, perf_csv, prometheus
from ansible_collections.continuum.hydra.plugins.plugin_utils._render._text import one_line

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


def write_file(path: str, pieces: Iterable[str], warn: Callable[[str], None]) -> bool:
    """The pieces written atomically at path as they come (a renderer's errors come while writing); whether written.
    A failure, the disk's or the renderer's, is one line to warn."""
    try:
        write_atomic(path, pieces)
        return True
    except OSError as exc:
        warn("cannot write %s: %s" % (path, exc))
    except Exception as exc:  # pylint: disable=broad-exception-caught
        # A renderer's bug costs its own file, not the report's other files.
        warn("cannot render %s: %s: %s" % (path, type(exc).__name__, one_line(exc)))
    return False


def write_report(report: Mapping[str, Any], directory: str, names: Iterable[str], now: datetime.datetime,
                 warn: Callable[[str], None]) -> list[str]:
    """The chosen formats (JSON with its timestamped copy) and, when workloads ran, perf.csv; the paths written."""
    written = []
    for name, filename, render in selected(names):
        path = os.path.join(directory, filename)
        if write_file(path, render(report), warn):
            written.append(path)
            if name == "json":
                _stamp(path, os.path.join(directory, "%s-%s.json" % (REPORT_NAME, now.strftime("%Y%m%dT%H%M%S.%fZ"))), warn)
    if report.get("workloads"):
        path = os.path.join(directory, perf_csv.FILE_NAME)
        if write_file(path, perf_csv.render(report), warn):
            written.append(path)
    return written


def _stamp(path: str, stamped: str, warn: Callable[[str], None]) -> None:
    """The JSON report's timestamped copy: a hard link to the file just written (a 100,000-host report is ~5 GB; the
    next run replaces fleet-report.json by a rename, so the link keeps this run's), a copy where no link can be made
    (a file system without hard links, or that name taken)."""
    try:
        os.link(path, stamped)
    except OSError:
        write_file(stamped, _chunks_of(path), warn)


def _chunks_of(path: str, size: int = 1 << 20) -> Iterator[str]:
    with open(path, encoding="utf-8") as handle:
        while True:
            chunk = handle.read(size)
            if not chunk:
                return
            yield chunk

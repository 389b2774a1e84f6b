"""Every report file goes through formats.write_file: written whole or not at all, a failure one warning line."""

import datetime
import json
import os

from ansible_collections.continuum.hydra.plugins.plugin_utils._render import formats
from ansible_collections.continuum.hydra.tests.support.hostile_fleet import hostile_report

NOW = datetime.datetime(2026, 11, 27, 3, 0, 0, 123456, tzinfo=datetime.timezone.utc)


def _broken_renderer():
    yield "half a report"
    raise KeyError("totals")


def test_a_renderer_that_fails_midway_leaves_no_file_and_says_so_in_one_line(tmp_path):
    path = str(tmp_path / "fleet-report.md")
    warnings = []
    assert formats.write_file(path, _broken_renderer(), warnings.append) is False
    assert warnings == ["cannot render %s: KeyError: 'totals'" % path]
    assert os.listdir(str(tmp_path)) == []  # neither the file nor its temporary file


def test_a_path_that_cannot_be_written_is_one_warning(tmp_path):
    (tmp_path / "reports").write_text("a file where the directory should be")
    path = str(tmp_path / "reports" / "fleet-report.json")
    warnings = []
    assert formats.write_file(path, iter(["{}\n"]), warnings.append) is False
    assert len(warnings) == 1 and warnings[0].startswith("cannot write %s: " % path) and "\n" not in warnings[0]


def test_the_report_is_written_in_the_chosen_formats_with_the_json_copy_stamped(tmp_path):
    report = hostile_report()
    warnings = []
    written = formats.write_report(report, str(tmp_path), ["prometheus", "json"], NOW, warnings.append)
    assert warnings == []
    assert written == [str(tmp_path / "fleet-report.json"), str(tmp_path / "fleet-report.prom")]
    stamped = tmp_path / "fleet-report-20261127T030000.123456Z.json"
    assert sorted(os.listdir(str(tmp_path))) == sorted(["fleet-report.json", "fleet-report.prom", stamped.name])
    assert stamped.read_text() == (tmp_path / "fleet-report.json").read_text()
    assert json.loads(stamped.read_text())["hosts"].keys() == report["hosts"].keys()
    assert stamped.stat().st_ino == (tmp_path / "fleet-report.json").stat().st_ino  # a link: not written twice
    # the next run's report replaces fleet-report.json by a rename: this run's copy keeps its own text
    report["hosts"].popitem()
    later = datetime.datetime(2026, 11, 28, 3, 0, 0, tzinfo=datetime.timezone.utc)
    formats.write_report(report, str(tmp_path), ["json"], later, warnings.append)
    assert json.loads(stamped.read_text())["hosts"].keys() != report["hosts"].keys()
    assert json.loads((tmp_path / "fleet-report-20261128T030000.000000Z.json").read_text())["hosts"].keys() == report["hosts"].keys()


def test_where_no_link_can_be_made_the_stamped_copy_is_a_copy(tmp_path, monkeypatch):
    def no_links(source, target):
        raise PermissionError(1, "Operation not permitted", target)  # a file system without hard links (some SMB mounts)
    monkeypatch.setattr(formats.os, "link", no_links)
    warnings = []
    formats.write_report(hostile_report(), str(tmp_path), ["json"], NOW, warnings.append)
    stamped = tmp_path / "fleet-report-20261127T030000.123456Z.json"
    assert warnings == [] and stamped.read_text() == (tmp_path / "fleet-report.json").read_text()
    assert stamped.stat().st_ino != (tmp_path / "fleet-report.json").stat().st_ino

"""The human reports at 1,000 and 10,000 synthetic hosts: sizes, render time, and the time headless Chromium takes to
open the HTML page (issue 29).

The fleets are tests/support/ops_fleet.py scale_report(): 4 hardware classes, one fleet-wide warning (the clock not
synchronised), persistence mode off on 3 % of hosts, drift and stragglers on 1 %, rare faults (ECC, a lost GPU named
by its address, a hung nvidia-smi, unreachable hosts), findings folded over three runs - built through the production
functions. For each size: the bytes of fleet-report.html and fleet-report.md, the lines of the terminal summary, the
render time per host (median of the rounds, the sizes interleaved, the cyclic garbage collector paused as the callback
pauses it; the ratio 10k / 1k says whether rendering stays linear), and the wall time
of `chromium --headless --screenshot` on the page (start, parse, lay out, paint the first 1280x900) against the same
command on a page of a few bytes, rounds interleaved so both see the same machine.

    PYTHONPATH=collections .venv/bin/python benchmarks/report_scale.py [--rounds 3] [--sizes 1000 10000]
Targets (issue 29): HTML < 3 MB and opening in < 3 s at 10k hosts; Markdown < 60 KB; terminal < 40 lines.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

from ansible_collections.continuum.hydra.plugins.module_utils._atomic import write_atomic
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import cyclic_gc_paused
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import html, markdown, terminal
from ansible_collections.continuum.hydra.tests.support.ops_fleet import scale_report

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1280,900"]
BASELINE_PAGE = "<!DOCTYPE html><html><head><title>baseline</title></head><body><p>baseline</p></body></html>\n"
HTML_TARGET, MARKDOWN_TARGET, LINES_TARGET, OPEN_TARGET_S = 3 * 1000 * 1000, 60 * 1000, 40, 3.0


def render_time(render, report):
    """(seconds, bytes) of one streamed render, the pieces counted as they come (as the callback writes them)."""
    start = time.perf_counter()
    size = sum(len(piece.encode("utf-8")) for piece in render(report))
    return time.perf_counter() - start, size


def open_time(chromium, path, work):
    """Wall seconds of headless Chromium opening ``path`` and painting its first screen into a PNG."""
    profile = tempfile.mkdtemp(prefix="chromium-", dir=work)
    shot = os.path.join(work, "shot.png")
    try:
        start = time.perf_counter()
        proc = subprocess.run([chromium] + CHROMIUM_FLAGS + ["--user-data-dir=%s" % profile, "--screenshot=%s" % shot,
                                                             "file://" + path], capture_output=True, timeout=120, check=False)
        elapsed = time.perf_counter() - start
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    if proc.returncode != 0 or not os.path.exists(shot):
        raise SystemExit("chromium failed on %s: %s" % (path, proc.stderr.decode("utf-8", "replace")[-500:]))
    os.unlink(shot)
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    work = tempfile.mkdtemp(prefix="hydra-report-scale-")
    try:
        pages, figures, reports = {}, {}, {}
        baseline = os.path.join(work, "baseline.html")
        write_atomic(baseline, BASELINE_PAGE)
        for hosts in args.sizes:
            start = time.perf_counter()
            reports[hosts] = scale_report(hosts)
            print("%d hosts: fleet built and analysed in %.1f s" % (hosts, time.perf_counter() - start))
            pages[hosts] = os.path.join(work, "fleet-report-%d.html" % hosts)
            write_atomic(pages[hosts], html.render(reports[hosts]))
        timings = dict((hosts, {"html": [], "markdown": [], "terminal": []}) for hosts in args.sizes)
        for _unused in range(args.rounds):  # the sizes interleaved, the collector paused as the callback pauses it
            for hosts in args.sizes:
                report = reports[hosts]
                with cyclic_gc_paused():
                    for name, render in (("html", html.render), ("markdown", markdown.render)):
                        seconds, size = render_time(render, report)
                        timings[hosts][name].append(seconds)
                        figures[(hosts, name)] = size
                    start = time.perf_counter()
                    figures[(hosts, "lines")] = len(terminal.render(report))
                    timings[hosts]["terminal"].append(time.perf_counter() - start)
        for hosts in args.sizes:
            figures[(hosts, "timings")] = dict((k, statistics.median(v)) for k, v in timings[hosts].items())
        reports.clear()
        opened = dict((key, []) for key in ["baseline"] + list(args.sizes))
        if chromium:
            for _unused in range(args.rounds):
                opened["baseline"].append(open_time(chromium, baseline, work))
                for hosts in args.sizes:
                    opened[hosts].append(open_time(chromium, pages[hosts], work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| hosts | HTML | Markdown | terminal lines | render HTML, per host | render Markdown, per host | Chromium open (median) | of which the page |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    base = statistics.median(opened["baseline"]) if chromium else None
    for hosts in args.sizes:
        timing = figures[(hosts, "timings")]
        open_s = statistics.median(opened[hosts]) if chromium else None
        print("| %d | %.0f KB | %.1f KB | %d | %.0f us | %.1f us | %s | %s |" % (
            hosts, figures[(hosts, "html")] / 1000.0, figures[(hosts, "markdown")] / 1000.0, figures[(hosts, "lines")],
            timing["html"] / hosts * 1e6, timing["markdown"] / hosts * 1e6,
            "%.2f s" % open_s if open_s is not None else "no chromium", "%.2f s" % (open_s - base) if open_s is not None else "-"))
    if chromium:
        print("Chromium on a %d-byte page (baseline): %.2f s; rounds: %s" % (
            len(BASELINE_PAGE), base, dict((k, [round(v, 2) for v in vs]) for k, vs in opened.items())))
    small, large = min(args.sizes), max(args.sizes)
    if small != large:
        ratio = (figures[(large, "timings")]["html"] / large) / (figures[(small, "timings")]["html"] / small)
        print("HTML render time per host, %d / %d hosts: %.2f (1.0 = linear)" % (large, small, ratio))
    verdicts = [("HTML < 3 MB", figures[(large, "html")] < HTML_TARGET), ("Markdown < 60 KB", figures[(large, "markdown")] < MARKDOWN_TARGET),
                ("terminal < 40 lines", figures[(large, "lines")] < LINES_TARGET)]
    if chromium:
        verdicts.append(("open < 3 s", statistics.median(opened[large]) < OPEN_TARGET_S))
    print("at %d hosts: %s" % (large, ", ".join("%s %s" % (name, "met" if ok else "MISSED") for name, ok in verdicts)))


if __name__ == "__main__":
    main()

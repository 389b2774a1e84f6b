"""Shared test helpers: where the recorded fixtures live and how to read them."""

import os

# realpath: imported through the collections/ link, __file__ names the link, not the checkout.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
FIXTURES = os.path.join(REPO, "tests", "fixtures")


def fixture_path(*parts):
    return os.path.join(FIXTURES, *parts)


def read_fixture(*parts):
    with open(fixture_path(*parts)) as handle:
        return handle.read()


class CapturedDisplay:
    """Where a callback's display goes in a test or benchmark: the lines it printed (warnings prefixed as Ansible does)."""

    def __init__(self):
        self.lines = []

    def display(self, msg, color=None, **_kwargs):
        self.lines.append(msg)

    def warning(self, msg, **_kwargs):
        self.lines.append("[WARNING]: " + msg)

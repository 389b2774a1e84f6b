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

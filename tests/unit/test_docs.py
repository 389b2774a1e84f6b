import os
import subprocess
import sys

from ansible_collections.continuum.hydra.tests.support.helpers import REPO


def test_check_catalogue_doc_is_generated_from_the_code():
    generated = subprocess.run([sys.executable, os.path.join(REPO, "tests", "utils", "gen_checks_doc.py")],
                               check=True, capture_output=True, text=True,
                               env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "collections"))).stdout
    with open(os.path.join(REPO, "docs", "checks.md")) as handle:
        assert handle.read() == generated, "docs/checks.md is stale: run `make docs`"

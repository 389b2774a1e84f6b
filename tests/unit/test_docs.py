import os
import subprocess
import sys

from helpers import REPO


def test_check_catalogue_doc_is_generated_from_the_code():
    generated = subprocess.run([sys.executable, os.path.join(REPO, "tests", "utils", "gen_checks_doc.py")],
                               check=True, capture_output=True, text=True).stdout
    with open(os.path.join(REPO, "docs", "checks.md")) as handle:
        assert handle.read() == generated, "docs/checks.md is stale: run `make docs`"

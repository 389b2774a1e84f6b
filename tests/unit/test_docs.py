import os
import subprocess
import sys

import pytest

from ansible_collections.continuum.hydra.tests.support.helpers import REPO
from ansible_collections.continuum.hydra.tests.utils import gen_role_readmes


def test_check_catalogue_doc_is_generated_from_the_code():
    generated = subprocess.run([sys.executable, os.path.join(REPO, "tests", "utils", "gen_checks_doc.py")],
                               check=True, capture_output=True, text=True,
                               env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "collections"))).stdout
    with open(os.path.join(REPO, "docs", "checks.md")) as handle:
        assert handle.read() == generated, "docs/checks.md is stale: run `make docs`"


@pytest.mark.parametrize("role", gen_role_readmes.roles())
def test_role_readme_is_generated_from_its_argument_spec(role):
    with open(os.path.join(REPO, "roles", role, "README.md")) as handle:
        assert handle.read() == gen_role_readmes.render(role), "roles/%s/README.md is stale: run `make docs`" % role

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""hydra-healthcheck's entry point: the __main__.py of the zipapp the slurm_healthcheck role builds."""

import sys

from ansible_collections.continuum.hydra.plugins.module_utils._doctor import healthcheck

sys.exit(healthcheck.main(sys.argv[1:]))

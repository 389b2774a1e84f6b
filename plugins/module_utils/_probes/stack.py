# -*- coding: utf-8 -*-
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""PLACEHOLDER: being written."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.continuum.hydra.plugins.module_utils._probes._command import ProbeAbsent


def _todo(options):
    raise ProbeAbsent("not implemented yet")


probe_torch = probe_nvcc = _todo

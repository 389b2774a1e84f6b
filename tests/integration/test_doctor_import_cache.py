"""doctor's code compiled once per host (_host/import_cache.py), in real ansible-playbook runs of doctor.yml:
the first run fills the per-user cache, the next loads it and writes nothing, and every run judges alike."""

import os

import pytest

from ansible_collections.continuum.hydra.tests.support.fleet import (
    GPU_ONLY,
    MACHINE_BOUND,
    PERSISTENCE_ON,
    UNCORRECTABLE_ECC,
    fixture,
    host_vars,
    plant,
    run_playbook,
    write_host_bin,
)

pytestmark = pytest.mark.integration


def _outcomes(report):
    return dict((host, [(c["id"], c["status"], c["message"]) for c in entry["doctor"]["checks"]])
                for host, entry in report["hosts"].items())


def _entries(cache):
    directory = os.path.join(cache, "continuum-hydra", "bytecode")
    if not os.path.isdir(directory):
        return {}
    return dict((name, os.stat(os.path.join(directory, name)).st_mtime_ns) for name in os.listdir(directory))


def _run(tmp_path, name, cache, dont_write):
    a100 = fixture("a100-sxm4-v12.xml")
    # PYTHONDONTWRITEBYTECODE as the module sees it ("" is unset for Python): the play's environment sets it.
    environment = {"XDG_CACHE_HOME": cache, "PYTHONDONTWRITEBYTECODE": "1" if dont_write else ""}
    hosts = {}
    for host, xml in (("ok", plant(a100, PERSISTENCE_ON)), ("ecc", plant(a100, PERSISTENCE_ON, UNCORRECTABLE_ECC))):
        values = host_vars(write_host_bin(str(tmp_path / name), host, xml))
        values["hydra_environment"].update(environment)
        hosts[host] = values
    report_dir = str(tmp_path / name / "reports")
    os.makedirs(report_dir)
    proc, report = run_playbook({"all": {"hosts": hosts}}, report_dir,
                                extra_vars={"hydra_only": GPU_ONLY, "hydra_exclude": MACHINE_BOUND})
    assert proc.returncode == 0 and report is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    return _outcomes(report)


def test_the_first_run_fills_the_cache_and_the_next_loads_it(tmp_path):
    cache = str(tmp_path / "cache")
    first = _run(tmp_path, "first", cache, dont_write=False)
    filled = _entries(cache)
    assert len(filled) > 20  # doctor's run, its probes and checks: one entry per module
    second = _run(tmp_path, "second", cache, dont_write=False)
    assert _entries(cache) == filled  # loaded, nothing compiled or written again
    assert second == first
    assert [status for _id, status, _message in first["ecc"] if _id == "gpu.ecc_errors"] == ["FAIL"]
    # Told not to write bytecode: nothing in a fresh cache, and the same verdicts.
    fresh = str(tmp_path / "fresh")
    assert _run(tmp_path, "no-write", fresh, dont_write=True) == first and _entries(fresh) == {}

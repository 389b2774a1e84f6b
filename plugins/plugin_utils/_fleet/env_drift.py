# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Environment drift across a fleet: package versions that differ from their class's majority (pure).

Input is what continuum.hydra.env_setup returns per host (its `manifest` key holds the packages).

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import re
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from ansible_collections.continuum.hydra.plugins.module_utils._env_setup.plan import canonical_name

DEFAULT_CLASS = "all"


def host_packages(entry: Any) -> Optional[dict[str, str]]:
    """{canonical name: version} from an env_setup result, a manifest, or a {name: version} mapping; None if none."""
    if not isinstance(entry, dict):
        return None
    if isinstance(entry.get("manifest"), dict):
        entry = entry["manifest"]
    packages = entry.get("packages", entry)
    if isinstance(packages, list):
        try:
            return dict((canonical_name(pkg["name"]), pkg["version"]) for pkg in packages)
        except (TypeError, KeyError):
            return None
    if isinstance(packages, dict) and packages and all(isinstance(v, str) for v in packages.values()):
        return dict((canonical_name(name), version) for name, version in packages.items())
    return None


def _version_key(version: Optional[str]) -> tuple[int, tuple[tuple[int, int, str], ...]]:
    """Natural order of version strings ("2.10" after "2.9"); None (not installed) first."""
    if version is None:
        return (0, ())
    return (1, tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.findall(r"\d+|[^\d.]+", version)))


def majority_version(versions: Iterable[Optional[str]]) -> Optional[str]:
    """The most common version (None for "not installed"); a tie goes to an installed version, then the highest."""
    counts: dict[Optional[str], int] = {}
    for version in versions:
        counts[version] = counts.get(version, 0) + 1
    return max(counts, key=lambda version: (counts[version], _version_key(version)))


def environment_drift(host_envs: Mapping[str, Any], host_classes: Optional[Mapping[str, str]] = None,
                      default_class: str = DEFAULT_CLASS, ignore: Iterable[str] = ()) -> dict[str, Any]:
    """Per class of hosts, the majority version of every package and the hosts that differ from it.

    host_envs: {host: env_setup result | manifest | {name: version}}; hosts without packages are listed in
    `no_manifest`. host_classes: {host: class name}; others are in `default_class`. A package missing on
    a host is drift with version None; one present on a minority only has majority None. `ignore`
    names packages left out (for example pip). Everything is sorted, so equal input gives equal output.
    """
    host_classes = host_classes or {}
    ignored = set(canonical_name(name) for name in ignore)
    members: dict[str, dict[str, dict[str, str]]] = {}
    no_manifest: list[str] = []
    for host in sorted(host_envs):
        packages = host_packages(host_envs[host])
        if packages is None:
            no_manifest.append(host)
            continue
        packages = dict((name, version) for name, version in packages.items() if name not in ignored)
        members.setdefault(host_classes.get(host, default_class), {})[host] = packages

    classes: dict[str, Any] = {}
    all_drift: list[dict[str, Any]] = []
    for class_name in sorted(members):
        hosts = members[class_name]
        names = sorted(set(name for packages in hosts.values() for name in packages))
        majority = dict((name, majority_version([hosts[host].get(name) for host in sorted(hosts)])) for name in names)
        drift = [{"host": host, "package": name, "version": hosts[host].get(name), "majority": majority[name]}
                 for name in names for host in sorted(hosts) if hosts[host].get(name) != majority[name]]
        classes[class_name] = {
            "hosts": sorted(hosts),
            "majority": majority,
            "drift": drift,
            "hosts_with_drift": sorted(set(item["host"] for item in drift)),
        }
        all_drift.extend(dict(item, **{"class": class_name}) for item in drift)
    return {"classes": classes, "drift": all_drift, "no_manifest": no_manifest}

# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""profile's 4 KiB random-read IOPS against fio on the same file, interleaved.

fio runs ``rw=randread bs=4k direct=1 ioengine=psync iodepth=1`` (time based); profile's
random_reads() runs on the same file, opened with O_DIRECT, for the same time. Rounds alternate
the two; the figure is profile / fio per round (median and range). Goal: 0.8 to 1.25.

    PYTHONPATH=collections .venv/bin/python benchmarks/disk_vs_fio.py [--directory /tmp] [--size-mib 1024] [--seconds 5] [--rounds 4]
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile

from ansible_collections.continuum.hydra.plugins.module_utils._profile.bench import disk


def fio_iops(path, size_mib, seconds):
    argv = ["fio", "--name=randread", "--filename=%s" % path, "--rw=randread", "--bs=4k", "--direct=1", "--ioengine=psync",
            "--iodepth=1", "--numjobs=1", "--size=%dM" % size_mib, "--time_based", "--runtime=%g" % seconds,
            "--output-format=json"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=seconds + 120).stdout
    return json.loads(out[out.index("{"):])["jobs"][0]["read"]["iops"]


def hydra_iops(path, size_mib, seconds):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        latencies = disk.random_reads(fd, size_mib * 1024 * 1024 // disk.BLOCK_BYTES, seconds, random.Random())
    finally:
        os.close(fd)
    return len(latencies) / (sum(latencies) / 1e9)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--directory", default=tempfile.gettempdir())
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    if not shutil.which("fio"):
        sys.exit("fio is not installed (apt-get install -y fio)")
    workdir = tempfile.mkdtemp(prefix="hydra-disk-vs-fio-", dir=args.directory)
    path = os.path.join(workdir, "testfile")
    try:
        # fio lays the file out (written data, no holes); both readers then use it as it is.
        subprocess.run(["fio", "--name=layout", "--filename=%s" % path, "--rw=write", "--bs=1M", "--direct=1",
                        "--size=%dM" % args.size_mib, "--output-format=json"], capture_output=True, check=True, timeout=600)
        rounds = []
        for _round in range(args.rounds):
            fio = fio_iops(path, args.size_mib, args.seconds)
            ours = hydra_iops(path, args.size_mib, args.seconds)
            rounds.append({"fio_iops": round(fio, 1), "hydra_iops": round(ours, 1), "ratio": round(ours / fio, 3)})
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    ratios = [r["ratio"] for r in rounds]
    median = statistics.median(ratios)
    print(json.dumps({"directory": args.directory, "size_mib": args.size_mib, "seconds": args.seconds, "rounds": rounds,
                      "ratio_median": round(median, 3), "ratio_range": [min(ratios), max(ratios)],
                      "goal": "0.8 <= ratio_median <= 1.25", "met": 0.8 <= median <= 1.25}, indent=2))


if __name__ == "__main__":
    main()

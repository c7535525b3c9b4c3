#!/usr/bin/env python3
"""Speed of the noise sampler (powerdp/privacy/sampler.py): µs per released value, one JSON object.

    python benchmarks/sampler.py                       # 7840 values a release (one learning client), 200 releases
    python benchmarks/sampler.py --values 7840 --releases 500
    PYTHONPATH=/tmp/old python benchmarks/sampler.py   # another version's sampler (same public functions)

For each of laplace_release and gaussian_release at the product's scale (noise scale 1, sensitivity 0.05), and
staircase_release at ε 1 and 10 per entry (sensitivity 0.05; ``--no-staircase`` for a version without it), with
a secret source (AES-256-CTR words) and a seeded one (PCG64 words): the median over releases of wall and CPU time
per value. The first release of a process (numba's import and the kernels' load from the cache, or their
compilation on a fresh machine) is reported apart as ``first_release_s``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--values", type=int, default=7840, help="entries per release (default 7840: 784 x 10 weights)")
    ap.add_argument("--releases", type=int, default=200)
    ap.add_argument("--no-staircase", action="store_true", help="skip staircase_release (a version without it)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    import powerdp
    from powerdp.privacy import noise_rng
    from powerdp.privacy.sampler import gaussian_release, laplace_release

    import_s = time.perf_counter() - t0
    value = np.random.default_rng(0).normal(size=args.values)
    out: dict = {"powerdp": os.path.dirname(powerdp.__file__), "values": args.values, "releases": args.releases,
                 "import_s": round(import_s, 3)}
    t0 = time.perf_counter()
    gaussian_release(value, 1.0, 0.05, noise_rng(None, 0))
    laplace_release(value, 1.0, 0.05, noise_rng(None, 0))
    out["first_release_s"] = round(time.perf_counter() - t0, 3)
    for source in ("secret", "seeded"):
        src = noise_rng(None if source == "secret" else 7, 0)
        kinds = [("laplace", laplace_release), ("gaussian", gaussian_release)]
        if not args.no_staircase:
            from powerdp.privacy.sampler import staircase_release

            kinds += [(f"staircase_eps{e:g}", lambda v, _s, sens, src, e=e: staircase_release(v, sens, e, src)) for e in (1.0, 10.0)]
        for name, release in kinds:
            wall, cpu = [], []
            for _ in range(args.releases):
                w, c = time.perf_counter(), time.process_time()
                release(value, 1.0, 0.05, src)
                wall.append(time.perf_counter() - w)
                cpu.append(time.process_time() - c)
            out[f"{name}_{source}"] = {"wall_us_per_value": round(1e6 * statistics.median(wall) / args.values, 4),
                                       "cpu_us_per_value": round(1e6 * statistics.median(cpu) / args.values, 4)}
    out["loadavg_1min"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

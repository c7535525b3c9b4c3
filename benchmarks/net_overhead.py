"""What the network costs a round: the net backend (zone servers over gRPC with mutual TLS, on this host's loopback)
against the process backend (worker processes on pipes), the same split case, the same seeded run, interleaved.

    python benchmarks/net_overhead.py                 # case118, its 3 areas, one server (and one worker) a zone,
                                                      # 100 rounds of objl with active-set, 3 repeats
    python benchmarks/net_overhead.py --case ../shared/data/matpower/case13659pegase.m --zones 16 --method spectral \\
        --servers 2 --rounds 5 --local-solver clarabel --repeats 2

Both backends run the deployment (``--deployment``, ``--no-evaluation``), each coordinator a process of its own; the
zone servers are started once and serve every net run. Zones go to servers as the process backend gives them to its
workers (``assign_zones``, by own buses), so both spread the same work the same way. A round's time is the
coordinator's (``coordinator_view/history.csv``: ``wall_s``); the overhead is the net backend's mean round minus
the process backend's, per repeat. Servers listen on 127.0.0.1 only and are ended at the end (or on Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.net_jobs import ONE_THREAD, free_ports, wait_listening  # noqa: E402  (the network tests' own helpers)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def powerdp(*args: str) -> list[str]:
    return [sys.executable, "-m", "powerdp", *args]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="case118")
    ap.add_argument("--zones", type=int, default=3)
    ap.add_argument("--method", default="auto")
    ap.add_argument("--servers", type=int, default=None, help="zone servers (= process workers); default one per zone")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--local-solver", default="active-set")
    ap.add_argument("--algorithm", default="objl")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    servers = args.servers or args.zones
    work = Path(tempfile.mkdtemp(prefix="powerdp-net-bench-"))
    env = {**os.environ, **ONE_THREAD}
    procs: list[subprocess.Popen] = []
    rows = []
    try:
        dep, certs = work / "dep", work / "certs"
        split = ["partition", args.case, "--zones", str(args.zones), "--split", str(dep)]
        if args.method != "auto":
            split += ["--method", args.method]
        subprocess.run(powerdp("-q", *split), check=True, env=env)
        port = free_ports(servers)
        subprocess.run(powerdp("-q", "certs", "make", str(certs), "--zones", str(args.zones), "--servers", str(servers),
                               "--port", str(port)), check=True, env=env)
        groups = _regroup(dep, certs, servers, port, args.zones)
        for s, g in enumerate(groups):
            log = open(work / f"server{s}.log", "w")
            procs.append(subprocess.Popen(powerdp("zone", "serve", "--deployment", str(dep), "--zone", ",".join(map(str, g)),
                                                  "--certs", str(certs), "--allow-seeded"), stdout=log, stderr=subprocess.STDOUT, env=env))
        for s in range(len(groups)):
            wait_listening(port + s, timeout=300, proc=procs[s])
        common = ["-q", "run", "--deployment", str(dep), "--no-evaluation", "--algorithm", args.algorithm, "--epsilon", "0.1",
                  "--rounds", str(args.rounds), "--seed", "1", "--local-solver", args.local_solver, "--checkpoint-every", "0"]
        for rep in range(args.repeats):
            order = ("process", "net") if rep % 2 == 0 else ("net", "process")
            for backend in order:
                out = work / f"{backend}_{rep}"
                extra = ["--backend", "net", "--certs", str(certs)] if backend == "net" else ["--backend", "process", "--workers", str(servers)]
                before = load()
                t0 = time.perf_counter()
                done = subprocess.run(powerdp(*common, *extra, "--out", str(out)), capture_output=True, text=True, env=env)
                if done.returncode != 0:
                    raise SystemExit(f"{backend} run failed: {done.stderr[-2000:]}")
                total = time.perf_counter() - t0
                hist = pd.read_csv(out / "coordinator_view" / "history.csv")
                summary = json.loads((out / "coordinator_view" / "summary.json").read_text())["summary"]
                row = {"repeat": rep, "backend": backend, "rounds": len(hist), "round_mean_ms": 1e3 * float(hist["wall_s"].mean()),
                       "round_median_ms": 1e3 * float(hist["wall_s"].median()),
                       "round_p10_ms": 1e3 * float(hist["wall_s"].quantile(0.1)), "setup_s": summary["setup_s"], "process_s": total,
                       "load_before": before, "load_after": load()}
                if backend == "net":
                    row["bytes_per_round"] = summary["network"]["bytes"] / max(1, len(hist))
                rows.append(row)
                print(json.dumps(row), flush=True)
                shutil.rmtree(out)
        frame = pd.DataFrame(rows)
        per = frame.pivot(index="repeat", columns="backend", values="round_mean_ms")
        med = frame.pivot(index="repeat", columns="backend", values="round_median_ms")
        p10 = frame.pivot(index="repeat", columns="backend", values="round_p10_ms")
        print(f"\n{args.case}, {args.zones} zones over {len(groups)} server(s) / worker(s), {args.rounds} rounds, {args.local_solver}:")
        for rep in per.index:
            print(f"  repeat {rep}: process {per.loc[rep, 'process']:.2f} ms, net {per.loc[rep, 'net']:.2f} ms a round (mean); "
                  f"overhead {per.loc[rep, 'net'] - per.loc[rep, 'process']:+.2f} ms ({per.loc[rep, 'net'] / per.loc[rep, 'process'] - 1:+.1%}); "
                  f"medians {med.loc[rep, 'process']:.2f} / {med.loc[rep, 'net']:.2f} ms; "
                  f"10th percentiles {p10.loc[rep, 'process']:.2f} / {p10.loc[rep, 'net']:.2f} ms")
        diff = (per["net"] - per["process"]).to_numpy()
        print(f"  overhead a round: mean {np.mean(diff):+.2f} ms, range {np.min(diff):+.2f} .. {np.max(diff):+.2f} ms; "
              f"net / process: {np.mean(per['net'] / per['process']):.3f}; on the medians {np.mean(med['net'] - med['process']):+.2f} ms, "
              f"on the 10th percentiles {np.mean(p10['net'] - p10['process']):+.2f} ms")
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


def _regroup(dep: Path, certs: Path, servers: int, port: int, zones: int) -> list[list[int]]:
    """zones.toml with server s hosting the zones of the process backend's worker s; its certificate renamed to match."""
    from powerdp.apps.power_flow.zone_data import load_public_network, public_partition_path
    from powerdp.engine.backends.base import assign_zones
    from powerdp.grid.partition import partition

    part = partition(load_public_network(dep), str(public_partition_path(dep)), allow_disconnected=True)
    groups = assign_zones([len(part.own_buses(z)) for z in range(part.n_zones)], servers)
    # certs make named server s "server-s" (or "zone-s" with one zone a server): keep those names, only regroup zones
    names = [f"zone-{s}" if servers == zones else f"server-{s}" for s in range(len(groups))]
    lines = ["[coordinator]", 'name = "coordinator"']
    for s, g in enumerate(groups):
        for z in g:
            lines += ["", f"[zones.{z}]", f'address = "127.0.0.1:{port + s}"', f'name = "{names[s]}"']
    (certs / "zones.toml").write_text("\n".join(lines) + "\n")
    return groups


if __name__ == "__main__":
    main()

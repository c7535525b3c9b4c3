"""What an MPI rank costs while it waits (issue #29: the coordinator must not busy-poll).

Under ``mpiexec -n 3``: ranks 1 and 2 wait for a message from rank 0 (the backends' own
:class:`~powerdp.engine.backends.mpi.Liveness` wait, heartbeats included) while rank 0 sleeps
``--wait`` seconds, as agent ranks wait while rank 0 parses and partitions a large case, and as rank 0
waits for a round's slowest zone. Prints one JSON line: each waiting rank's CPU time (user, system)
during the wait, and the machine's load average.

    mpiexec -n 3 python benchmarks/mpi_wait.py --wait 10
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time

from mpi4py import MPI

from powerdp.engine.backends import mpi


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wait", type=float, default=10.0, help="seconds rank 0 keeps the others waiting (default 10)")
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    me, size = comm.Get_rank(), comm.Get_size()
    live = mpi.Liveness(comm, range(1, size) if me == 0 else [0], timeout=max(60.0, 3 * args.wait))
    start = resource.getrusage(resource.RUSAGE_SELF)
    try:
        if me == 0:
            time.sleep(args.wait)
            for p in range(1, size):
                comm.send("go", dest=p, tag=mpi.TAG)
            cpu = {p: live.recv(p) for p in range(1, size)}
            print(json.dumps({
                "wait_s": args.wait, "ranks": size, "loadavg_1min": round(os.getloadavg()[0], 2),
                "waiting_rank_cpu_s": {p: {"user": u, "system": s} for p, (u, s) in cpu.items()},
                "waiting_rank_cpu_share": {p: round((u + s) / args.wait, 4) for p, (u, s) in cpu.items()},
            }), flush=True)
        else:
            live.recv(0)
            end = resource.getrusage(resource.RUSAGE_SELF)
            comm.send((round(end.ru_utime - start.ru_utime, 3), round(end.ru_stime - start.ru_stime, 3)), dest=0, tag=mpi.TAG)
    finally:
        live.stop()


if __name__ == "__main__":
    main()

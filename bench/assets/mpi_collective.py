"""One collective over mpi4py, for turbonet's Open MPI test and benchmark.

    mpi_collective.py allreduce|alltoall BYTES [ITERATIONS]

Every rank runs it on a buffer of BYTES and checks the result: once, or
with ITERATIONS after one warm-up, timed. Rank 0 prints one JSON line: the
operation, the ranks, the bytes, the host each rank ran on (MPI's processor
name) and the mean seconds per iteration (the slowest rank's).
"""

import array
import json
import sys

from mpi4py import MPI


def main():
    op, size = sys.argv[1], int(sys.argv[2])
    iterations = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    if op == "allreduce":
        send = array.array("i", [rank + 1]) * (size // 4)
        recv = array.array("i", [0]) * (size // 4)

        def once():
            comm.Allreduce([send, MPI.INT], [recv, MPI.INT], op=MPI.SUM)
            return recv[0] == recv[-1] == n * (n + 1) // 2
    elif op == "alltoall":
        block = size // n
        # Block j of rank i's buffer goes to rank j: it holds i.
        send = bytearray(b"".join(bytes([rank]) * block for _ in range(n)))
        recv = bytearray(block * n)

        def once():
            comm.Alltoall([send, MPI.BYTE], [recv, MPI.BYTE])
            return all(recv[j * block] == j for j in range(n))
    else:
        sys.exit(f"unknown operation {op}")
    ok = once()
    seconds = None
    if iterations:
        comm.Barrier()
        started = MPI.Wtime()
        for _ in range(iterations):
            ok = once() and ok
        seconds = comm.reduce((MPI.Wtime() - started) / iterations, op=MPI.MAX, root=0)
    hosts = comm.gather(MPI.Get_processor_name(), root=0)
    oks = comm.gather(ok, root=0)
    if rank == 0:
        print(json.dumps({"op": op, "ranks": n, "bytes": size, "hosts": hosts,
                          "ok": all(oks), "seconds": seconds}))


main()

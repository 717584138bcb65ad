"""One collective over mpi4py, for turbonet's Open MPI test.

    collective.py allreduce|alltoall BYTES

Every rank runs it once on a buffer of BYTES and checks the result; rank 0
prints one JSON line: the operation, the ranks, the bytes and the host each
rank ran on (MPI's processor name).
"""

import array
import json
import sys

from mpi4py import MPI


def main():
    op, size = sys.argv[1], int(sys.argv[2])
    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    if op == "allreduce":
        send = array.array("i", [rank + 1]) * (size // 4)
        recv = array.array("i", [0]) * (size // 4)
        comm.Allreduce([send, MPI.INT], [recv, MPI.INT], op=MPI.SUM)
        ok = recv[0] == recv[-1] == n * (n + 1) // 2
    elif op == "alltoall":
        block = size // n
        # Block j of rank i's buffer goes to rank j: it holds i.
        send = bytearray(b"".join(bytes([rank]) * block for _ in range(n)))
        recv = bytearray(block * n)
        comm.Alltoall([send, MPI.BYTE], [recv, MPI.BYTE])
        ok = all(recv[j * block] == j for j in range(n))
    else:
        sys.exit(f"unknown operation {op}")
    hosts = comm.gather(MPI.Get_processor_name(), root=0)
    oks = comm.gather(ok, root=0)
    if rank == 0:
        print(json.dumps({"op": op, "ranks": n, "bytes": size, "hosts": hosts, "ok": all(oks)}))


main()

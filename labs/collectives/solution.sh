#!/bin/sh
# Reference solution of the collectives lab: a job in leaf order (the ring
# crosses between the leaves twice, not eight times), a ring AllReduce of a
# large vector over it and a tree AllReduce of a small one, then wait for
# both to finish.
set -e
tn=${TURBONET:-turbonet}
# The lab to work on when several are up (a test sets it).
lab=${TURBONET_LAB:+--lab $TURBONET_LAB}
file=$(mktemp --suffix .toml)
trap 'rm -f "$file"' EXIT
cat > "$file" <<'TOML'
[[job]]
name = "by-leaf"
hosts = ["h0-0", "h0-1", "h0-2", "h0-3", "h1-0", "h1-1", "h1-2", "h1-3"]

[[workload]]
name = "ring"
kind = "collective"
job = "by-leaf"
op = "all-reduce"
algorithm = "ring"
size = "2MiB"
iterations = 3

[[workload]]
name = "tree"
kind = "collective"
job = "by-leaf"
op = "all-reduce"
algorithm = "tree"
size = "256B"
iterations = 5
start = "8s"
TOML
$tn workload start $lab "$file"
# Until both are over (each run takes about 10 s here).
for _ in $(seq 120); do
  over=$($tn workload show $lab --json |
    python3 -c 'import json,sys; print(sum(w["state"] in ("done","failed","stopped") for w in json.load(sys.stdin) if w["name"] in ("ring","tree")))')
  [ "$over" = 2 ] && exit 0
  sleep 1
done
echo "the workloads did not finish in 120 s" >&2
exit 1

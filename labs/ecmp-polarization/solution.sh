#!/bin/sh
# Reference solution of the ecmp-polarization lab: give pod 0's aggregation
# switches seeds of their own (any that differ from their edges'), and give
# pod 1's edges and aggregation switches one seed together.
set -e
tn=${TURBONET:-turbonet}
# The lab to work on when several are up (a test sets it).
lab=${TURBONET_LAB:+--lab $TURBONET_LAB}
$tn exec $lab agg0-0 -- sysctl -q -w net.ipv4.fib_multipath_hash_seed=1001
$tn exec $lab agg0-1 -- sysctl -q -w net.ipv4.fib_multipath_hash_seed=1002
for node in edge1-0 edge1-1 agg1-0 agg1-1; do
  $tn exec $lab $node -- sysctl -q -w net.ipv4.fib_multipath_hash_seed=7
done

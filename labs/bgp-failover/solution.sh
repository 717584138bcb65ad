#!/bin/sh
# Reference solution of the bgp-failover lab: take core0 down, as a
# student does, and wait until BGP has converged around it.
set -e
tn=${TURBONET:-turbonet}
# The lab to work on when several are up (a test sets it).
lab=${TURBONET_LAB:+--lab $TURBONET_LAB}
$tn fail $lab node core0
i=0
while $tn show bgp $lab --json | grep -q '"converged": false'; do
  i=$((i + 1))
  [ $i -lt 100 ] || { echo "BGP did not converge around core0" >&2; exit 1; }
  sleep 0.1
done

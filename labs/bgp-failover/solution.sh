#!/bin/sh
# Reference solution of the bgp-failover lab, as a student types it: undo
# the shut session and the wrong AS in vtysh, wait until every session is
# up and BGP has converged, then take core0 down and wait until BGP has
# converged around it.
set -e
tn=${TURBONET:-turbonet}
# The lab to work on when several are up (a test sets it).
lab=${TURBONET_LAB:+--lab $TURBONET_LAB}
# agg1-0's neighbour core1 was shut (`Idle (Admin)` in `show bgp summary`).
$tn exec $lab agg1-0 -- vtysh -c 'conf t' -c 'router bgp' -c 'no neighbor 10.1.0.43 shutdown'
# edge0-1 expected agg0-1 in the wrong AS (the pod's aggregation AS is
# agg0-0's: `show running-config` on agg0-1 says 4200000001).
$tn exec $lab edge0-1 -- vtysh -c 'conf t' -c 'router bgp' -c 'neighbor 10.1.0.7 remote-as 4200000001'
converge() {
  i=0
  while $tn show bgp $lab --json | grep -q '"converged": false'; do
    i=$((i + 1))
    [ $i -lt 300 ] || { echo "BGP did not converge $1" >&2; exit 1; }
    sleep 0.1
  done
}
converge "once the sessions were fixed"
$tn fail $lab node core0
converge "around core0"

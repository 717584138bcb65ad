#!/bin/sh
# Reference solution of the hpn-dual-tor lab: fail h0-0's plane-0 rail-0
# port, wait until BGP has converged around it, then pin h1-0's traffic to
# that address to its plane-1 port.
set -e
tn=${TURBONET:-turbonet}
# The lab to work on when several are up (a test sets it).
lab=${TURBONET_LAB:+--lab $TURBONET_LAB}
$tn fail $lab link h0-0--tor0-r0p0
i=0
while $tn show bgp $lab --json | grep -q '"converged": false'; do
  i=$((i + 1))
  [ $i -lt 100 ] || { echo "BGP did not converge around the failed port" >&2; exit 1; }
  sleep 0.1
done
# The gateway h1-0's default route uses through its plane-1 port.
gw=$($tn exec $lab h1-0 -- ip route show default | sed -n 's/.*via \([0-9.]*\) dev tor1-r0p1.*/\1/p' | head -n 1)
[ -n "$gw" ] || { echo "h1-0 has no default route through tor1-r0p1" >&2; exit 1; }
$tn exec $lab h1-0 -- ip route replace 10.128.0.2/32 via "$gw" dev tor1-r0p1 onlink

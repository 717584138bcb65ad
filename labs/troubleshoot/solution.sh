#!/bin/sh
# Reference solution of the troubleshoot lab: whatever the seed broke, put
# every port back up at 9000 bytes and every route back as the fabric needs
# it, through `turbonet exec` (what a student who found each fault types).
# Leaf L's hosts are 10.128.0.(4L)/30, its host .(4L+2) behind .(4L+1);
# leaf L's link to spine S is 10.1.0.(4L+2S)/31 (the leaf has the even
# address).
set -e
tn=${TURBONET:-turbonet}
# The lab to work on when several are up (a test sets it).
lab=${TURBONET_LAB:+--lab $TURBONET_LAB}
for node in leaf0 leaf1 leaf2 spine0 spine1 h0-0 h1-0 h2-0; do
  $tn exec $lab $node -- sh -c \
    'for p in $(ls /sys/class/net); do [ "$p" = lo ] || ip link set "$p" up mtu 9000; done'
done
for l in 0 1 2; do
  $tn exec $lab h$l-0 -- ip route replace default via 10.128.0.$((4 * l + 1)) dev leaf$l onlink
  for m in 0 1 2; do
    [ "$l" = "$m" ] && continue
    $tn exec $lab leaf$l -- ip route replace 10.128.0.$((4 * m))/30 \
      nexthop via 10.1.0.$((4 * l + 1)) dev spine0 \
      nexthop via 10.1.0.$((4 * l + 3)) dev spine1
  done
  for s in 0 1; do
    $tn exec $lab spine$s -- ip route replace 10.128.0.$((4 * l))/30 via 10.1.0.$((4 * l + 2 * s)) dev leaf$l
  done
done

#!/bin/sh
# Reference solution of the static-ecmp lab: what a student types, through
# `turbonet exec`. Leaf L's hosts are 10.128.0.(4L)/30; leaf L's link to
# spine S is 10.1.0.(4L+2S)/31 (the leaf has the even address).
set -e
tn=${TURBONET:-turbonet}
# The lab to work on when several are up (a test sets it).
lab=${TURBONET_LAB:+--lab $TURBONET_LAB}
for s in 0 1; do
  for l in 0 1 2; do
    $tn exec $lab spine$s -- ip route replace 10.128.0.$((4 * l))/30 via 10.1.0.$((4 * l + 2 * s)) dev leaf$l
  done
done
for l in 0 1 2; do
  for m in 0 1 2; do
    [ "$l" = "$m" ] && continue
    $tn exec $lab leaf$l -- ip route replace 10.128.0.$((4 * m))/30 \
      nexthop via 10.1.0.$((4 * l + 1)) dev spine0 \
      nexthop via 10.1.0.$((4 * l + 3)) dev spine1
  done
done

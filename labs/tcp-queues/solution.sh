#!/bin/sh
# Reference solution of the tcp-queues lab: what a student who worked out
# the bandwidth-delay product types. 20 Mbit/s x 40 ms = 100 kB, about 67
# full frames.
set -e
tn=${TURBONET:-turbonet}
# The lab to work on when several are up (a test sets it).
lab=${TURBONET_LAB:+--lab $TURBONET_LAB}
# window: let the server's receive window grow past one BDP (the kernel's
# own default: up to 6 MiB).
$tn exec $lab server -- sysctl -q -w net.ipv4.tcp_rmem='4096 131072 6291456'
# queue and ecn: about 1.5 BDP of queue, marking CE from 0.6 BDP deep
# (cubic backs off to 0.7 of its window: a mark below 0.43 BDP would leave
# the link idle after each back-off)...
$tn link set $lab r0--r1 --queue 100p --ecn 40p
# ...and a client that asks for ECN (the server accepts it by default).
$tn exec $lab client -- sysctl -q -w net.ipv4.tcp_ecn=1

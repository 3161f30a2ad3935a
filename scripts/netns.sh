#!/usr/bin/env bash
# A network namespace reaching the host over a veth link, for the reliability
# suite's network-partition case (needs root: CAP_NET_ADMIN).
#   scripts/netns.sh up   NAME   -> host side 10.201.0.1/24 on link sth0, namespace side 10.201.0.2/24
#   scripts/netns.sh down NAME
# Taking the host side down (`ip link set sth0 down`) cuts the namespace off:
# packets are lost, nothing is reset — a real partition, not a closed socket.
set -euo pipefail
cmd=$1; ns=$2
case "$cmd" in
up)
  ip netns del "$ns" 2>/dev/null || true
  ip link del sth0 2>/dev/null || true
  ip netns add "$ns"
  ip link add sth0 type veth peer name stn0
  ip link set stn0 netns "$ns"
  ip addr add 10.201.0.1/24 dev sth0
  ip link set sth0 up
  ip -n "$ns" addr add 10.201.0.2/24 dev stn0
  ip -n "$ns" link set stn0 up
  ip -n "$ns" link set lo up
  echo "netns $ns up: host 10.201.0.1 (link sth0), namespace 10.201.0.2"
  ;;
down)
  ip netns del "$ns" 2>/dev/null || true
  ip link del sth0 2>/dev/null || true
  ;;
*) echo "usage: $0 up|down NAME" >&2; exit 2 ;;
esac

# shellcheck shell=sh
# Link profile for one node (sourced by docker/entrypoint.sh; POSIX sh).
#
#   LINK_RATE=200mbit   egress rate limit with tbf (tc units: bit kbit mbit gbit, bps kbps mbps gbps)
#   LINK_RATES=node2=50mbit[,node1=100mbit]   per-node egress rates: this host's entry replaces
#                       LINK_RATE on this node (the doctor's slow-link fault); LINK_RATE stays the
#                       expectation the results record
#   LINK_DELAY=1ms      one-way egress delay with netem (us, ms, s)
#   LINK_IFACE=eth0     the interface (the compose network's)
#   LINK_STRICT=1       a profile that cannot be applied fails the node (exit 3); 0: warn and go on
#
# Exports what was really applied (suite.system.sysinfo records LINK_* per host in the results):
#   LINK_QDISC          `tc qdisc show` of the interface after shaping
#   LINK_RATE_NODE      the rate this node's egress was given (LINK_RATES entry, else LINK_RATE)
#   LINK_RATE_APPLIED   yes | no: <why>
#   LINK_DELAY_APPLIED  yes | no: <why>
# Only egress is shaped, on every node alike, so each node-to-node path crosses one limiter.
# Traffic between ranks of the same node goes over loopback and is never shaped.
iface="${LINK_IFACE:-eth0}"
strict="${LINK_STRICT:-1}"

_link_fail() {
  echo "link: error: $*" >&2
  exit 3
}
_link_skip() {  # what cannot be applied: fatal when strict, else a loud warning and a record
  if [ "$strict" = 1 ]; then
    _link_fail "$2 (set LINK_STRICT=0 to run without it)"
  fi
  echo "link: WARNING: ########## $2: running WITHOUT it ##########" >&2
  eval "export $1=\"no: \$2\""
}

LINK_RATE_APPLIED=none LINK_DELAY_APPLIED=none
rate="${LINK_RATE:-}"
for entry in $(echo "${LINK_RATES:-}" | tr ',' ' '); do
  if [ "${entry%%=*}" = "$(hostname)" ]; then rate="${entry#*=}"; fi
done
LINK_RATE_NODE="$rate"
export LINK_RATE_NODE
if [ -n "$rate" ] && ! echo "$rate" | grep -Eq '^[0-9]+(\.[0-9]+)?([kmgt]?bit|[kmgt]?bps)$'; then
  echo "link: error: LINK_RATE=$rate ($(hostname)) is not a tc rate (e.g. 200mbit, 1gbit, 50mbps)" >&2
  exit 2
fi
if [ -n "${LINK_DELAY:-}" ] && ! echo "$LINK_DELAY" | grep -Eq '^[0-9]+(\.[0-9]+)?(us|ms|s)$'; then
  echo "link: error: LINK_DELAY=$LINK_DELAY is not a tc time (e.g. 500us, 1ms)" >&2
  exit 2
fi
why=""
if [ "$(id -u)" != 0 ]; then
  why="a link profile needs root and NET_ADMIN in the container (compose: user: root, cap_add: NET_ADMIN)"
elif ! command -v tc >/dev/null 2>&1; then
  why="tc is not installed in the image (iproute2)"
fi
if [ -n "$why" ]; then
  [ -n "$rate" ] && _link_skip LINK_RATE_APPLIED "$why"
  [ -n "${LINK_DELAY:-}" ] && _link_skip LINK_DELAY_APPLIED "$why"
else
  parent=root
  if [ -n "${LINK_DELAY:-}" ]; then
    if err=$(tc qdisc replace dev "$iface" root handle 1: netem delay "$LINK_DELAY" 2>&1); then
      LINK_DELAY_APPLIED=yes
      parent="parent 1:1"   # tbf becomes netem's child: delay, then rate
    else
      case "$err" in
        *"qdisc kind is unknown"*|*"Unknown qdisc"*)
          _link_skip LINK_DELAY_APPLIED "this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): LINK_DELAY=$LINK_DELAY cannot be emulated on this host" ;;
        *"Operation not permitted"*)
          _link_fail "tc: $err (the container needs cap_add: NET_ADMIN)" ;;
        *) _link_fail "tc netem on $iface: $err" ;;
      esac
    fi
  fi
  if [ -n "$rate" ]; then
    # burst: half a millisecond of traffic at the rate (4 KiB floor: two full frames), so the link behaves
    # like a wire: tbf's hrtimer keeps the rate with it (measured here: 100mbit at 5 KB burst sustains the
    # same 11.8 MB/s as at 50 KB). The old rate/250 (50 KB at 100mbit, 32 KiB floor) let a 64 KiB message
    # through at 3x the link's rate, and the tree broadcast's small sizes ran faster than any link model.
    burst=$(echo "$rate" | awk '{
      n = $0 + 0; u = $0; sub(/^[0-9.]+/, "", u)
      m = 1; if (u ~ /^k/) m = 1e3; else if (u ~ /^m/) m = 1e6; else if (u ~ /^g/) m = 1e9; else if (u ~ /^t/) m = 1e12
      bits = n * m; if (u ~ /bps$/) bits *= 8
      b = int(bits / 8 / 2000); if (b < 4096) b = 4096; print b }')
    if [ "$parent" = root ]; then where="root handle 1:"; else where="parent 1:1 handle 10:"; fi
    # shellcheck disable=SC2086  # $where is several words on purpose
    if err=$(tc qdisc replace dev "$iface" $where tbf rate "$rate" burst "$burst" latency 50ms 2>&1); then
      LINK_RATE_APPLIED=yes
    else
      case "$err" in
        *"Operation not permitted"*) _link_fail "tc: $err (the container needs cap_add: NET_ADMIN)" ;;
        *) _link_fail "tc tbf on $iface: $err" ;;
      esac
    fi
  fi
fi
LINK_QDISC="$(tc qdisc show dev "$iface" 2>/dev/null | tr '\n' ';' || true)"
export LINK_RATE_APPLIED LINK_DELAY_APPLIED LINK_QDISC
echo "link: $(hostname) $iface rate=${rate:-unlimited} (${LINK_RATE_APPLIED}) delay=${LINK_DELAY:-none} (${LINK_DELAY_APPLIED}); qdisc: ${LINK_QDISC}" >&2

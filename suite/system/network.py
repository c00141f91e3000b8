"""This host's IPv4 interfaces (ioctl), the kernel's routes (/proc/net/route), and which
interfaces lead over paths of their own between hosts. Reads only; starts no group."""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct

_SIOCGIFFLAGS, _SIOCGIFADDR, _SIOCGIFNETMASK, _IFF_LOOPBACK = 0x8913, 0x8915, 0x891B, 0x8


def route_table_text(route_table: str | None = None) -> str:
    """``route_table`` if given, else the kernel's /proc/net/route ("" where it cannot be read)."""
    if route_table is not None:
        return route_table
    try:
        with open("/proc/net/route") as fh:
            return fh.read()
    except OSError:
        return ""


def route_interface(address: str, route_table: str | None = None) -> str | None:
    """The interface the kernel's main IPv4 table (/proc/net/route: little-endian hex destination and
    mask) sends ``address`` through: the longest matching prefix, the lowest metric among equals."""
    want = int(ipaddress.IPv4Address(address))
    best = None
    for line in route_table_text(route_table).splitlines()[1:]:
        f = line.split()
        if len(f) < 8:
            continue
        dest, mask = (int.from_bytes(bytes.fromhex(x), "little") for x in (f[1], f[7]))
        if want & mask == dest:
            key = (bin(mask).count("1"), -int(f[6]))
            if best is None or key > best[0]:
                best = (key, f[0])
    return best[1] if best else None


def local_interfaces() -> list[dict]:
    """This host's interfaces with an IPv4 address: name, address, prefix length, loopback flag
    (SIOCGIFADDR/SIOCGIFNETMASK/SIOCGIFFLAGS; interfaces without an IPv4 address are left out)."""
    out = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sk:
        for _, name in socket.if_nameindex():
            req = struct.pack("256s", name.encode()[:15])
            try:
                addr = socket.inet_ntoa(fcntl.ioctl(sk.fileno(), _SIOCGIFADDR, req)[20:24])
                mask = socket.inet_ntoa(fcntl.ioctl(sk.fileno(), _SIOCGIFNETMASK, req)[20:24])
                flags = struct.unpack("H", fcntl.ioctl(sk.fileno(), _SIOCGIFFLAGS, req)[16:18])[0]
            except OSError:  # no IPv4 address
                continue
            out.append(
                {
                    "name": name,
                    "address": addr,
                    "prefix": ipaddress.IPv4Network(f"0.0.0.0/{mask}").prefixlen,
                    "loopback": bool(flags & _IFF_LOOPBACK) or ipaddress.IPv4Address(addr).is_loopback,
                }
            )
    return out


def interface_paths(ranks: list[dict]) -> tuple[list[dict], str | None]:
    """The interfaces that lead over paths of their own, from every rank's ``{"host", "interfaces"
    (local_interfaces()), "routes" (/proc/net/route text)}``: (paths, None) when there are at least two
    on different networks, else ([], why the comparison is not offered). A path: an interface name
    every rank has, not loopback, whose address on every other host each rank routes through it."""
    hosts = {r["host"] for r in ranks}
    if len(hosts) < 2:
        return [], (
            f"all {len(ranks)} ranks run on one host: traffic between its own addresses goes through the "
            "kernel loopback whatever GLOO_SOCKET_IFNAME names, so there is one path to compare"
        )
    by_rank = [{i["name"]: i for i in r["interfaces"] if not i["loopback"]} for r in ranks]
    names = [n for n in by_rank[0] if all(n in b for b in by_rank[1:])]
    paths, why = [], []
    for name in names:
        ok = True
        for ra in ranks:
            for b, rb in enumerate(ranks):
                if ra["host"] == rb["host"]:
                    continue
                peer = by_rank[b][name]["address"]
                via = route_interface(peer, ra["routes"])
                if via != name:
                    why.append(f"{name}: {ra['host']} reaches {rb['host']}'s {peer} via {via or 'no route'}")
                    ok = False
                    break
            if not ok:
                break
        if ok:
            own = by_rank[0][name]
            net = str(ipaddress.IPv4Network(f"{own['address']}/{own['prefix']}", strict=False))
            if net not in {p["network"] for p in paths}:
                paths.append({"name": name, "network": net})
    if len(paths) >= 2:
        return paths, None
    found = ", ".join(f"{p['name']} ({p['network']})" for p in paths) or "none"
    return [], (
        f"the ranks share fewer than two interfaces with routes of their own between hosts "
        f"(found: {found}" + (f"; {'; '.join(why[:3])}" if why else "") + ")"
    )

#!/usr/bin/env python3
"""A scripted, hostile DHCPv4 server for tests/dhcp_peers.rs (issue 35).

Usage: dhcp_peers_server.py IFNAME NET SCENARIO LOG
  NET is the lab's second octet N (the subnet is 10.N.0.0/24, the server 10.N.0.1).
Answers every DISCOVER and REQUEST on IFNAME (UDP port 67, SO_BINDTODEVICE, replies broadcast
to port 68) as SCENARIO says; logs one line per message received to LOG ("T DISCOVER xid mac",
"T REQUEST xid mac renew", ..., T the server's monotonic clock in seconds). Prints "ready" to LOG once it listens.
"""
import socket
import struct
import sys
import time

IFNAME, NET, SCENARIO, LOG = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
SERVER = bytes([10, NET, 0, 1])
LEASED = bytes([10, NET, 0, 60])
COOKIE = b"\x63\x82\x53\x63"
KINDS = {1: "DISCOVER", 3: "REQUEST", 4: "DECLINE", 7: "RELEASE", 8: "INFORM"}


def log(line):
    with open(LOG, "a") as f:
        f.write(line + "\n")


def opt(code, value):
    return bytes([code, len(value)]) + value


def u32(v):
    return struct.pack("!I", v)


def options(kind):
    """The options of an OFFER (2) or ACK (5) in this scenario; the tail is written last,
    without an END option, so that a truncated option really runs past the packet."""
    lease = {"lease0": 0, "leasemax": 0xFFFFFFFF}.get(SCENARIO, 120)
    o = opt(53, bytes([kind])) + opt(54, SERVER) + opt(51, u32(lease))
    if SCENARIO == "nak_renew":
        o += opt(58, u32(2)) + opt(59, u32(100))
    tail = b""
    mask = opt(1, bytes([255, 255, 255, 0]))
    router = opt(3, SERVER)
    if SCENARIO == "truncated_router":
        router, tail = b"", b"\x03\x04" + SERVER[:2]
    elif SCENARIO == "overflow_mask":
        mask, tail = b"", b"\x01\xff" + bytes([255, 255, 255, 0])
    elif SCENARIO == "short_mask":
        mask = opt(1, bytes([255, 255]))
    elif SCENARIO == "router_outside":
        router = opt(3, bytes([192, 0, 2, 1]))
    o += mask + router
    if SCENARIO == "r121_33":
        o += opt(121, bytes([33, 10, 9, 9, 9, 9]) + SERVER)
    elif SCENARIO == "r121_0gw":
        o += opt(121, bytes([0]) + SERVER + bytes([16, 10, 77]) + SERVER)
    elif SCENARIO == "r121_past":
        o += opt(121, bytes([16, 10, 77]) + SERVER + bytes([24, 10, 88]))
    if tail:
        return o + tail
    return o + b"\xff"


def reply(req, kind):
    xid = req[4:8]
    if SCENARIO == "other_xid":
        xid = u32((struct.unpack("!I", xid)[0] + 1) & 0xFFFFFFFF)
    yiaddr = {
        "yiaddr_zero": bytes(4),
        "yiaddr_bcast": bytes([255, 255, 255, 255]),
        "yiaddr_netbcast": bytes([10, NET, 0, 255]),
    }.get(SCENARIO, LEASED)
    if kind == 6:
        yiaddr = bytes(4)
    head = bytes([2, 1, 6, 0]) + xid + b"\x00\x00" + req[10:12]
    head += bytes(4) + yiaddr + SERVER + bytes(4) + req[28:44] + bytes(192)
    if kind == 6:
        body = opt(53, bytes([6])) + opt(54, SERVER) + opt(56, b"no renewals here") + b"\xff"
    else:
        body = options(kind)
    return head + COOKIE + body


def kind_of(req):
    i = 240
    while i + 1 < len(req):
        code = req[i]
        if code == 0:
            i += 1
            continue
        if code == 255:
            break
        n = req[i + 1]
        if code == 53 and n >= 1 and i + 2 < len(req):
            return req[i + 2]
        i += 2 + n
    return 0


def main():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, IFNAME.encode())
    s.bind(("0.0.0.0", 67))
    log("ready")
    while True:
        req, _ = s.recvfrom(4096)
        if len(req) < 244 or req[0] != 1 or req[236:240] != COOKIE:
            continue
        kind = kind_of(req)
        mac = req[28:34].hex(":")
        renew = req[12:16] != bytes(4)
        log(
            f"{time.monotonic():.3f} {KINDS.get(kind, kind)} {req[4:8].hex()} {mac}"
            + (" renew" if kind == 3 and renew else "")
        )
        if kind == 1:
            out = reply(req, 2)
        elif kind == 3 and renew and SCENARIO == "nak_renew":
            out = reply(req, 6)
        elif kind == 3:
            out = reply(req, 5)
        else:
            continue
        s.sendto(out, ("255.255.255.255", 68))


main()

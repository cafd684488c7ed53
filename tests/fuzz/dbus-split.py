#!/usr/bin/env python3
"""Split `dbus-monitor --system --binary` output into one file per message (the seeds of the
dbus-reply fuzz target): run the monitor against the test bus while the firewall applet talks to
firewalld, then `dbus-split.py mon.bin OUTDIR` writes the replies, errors and signals under 600
bytes (the ones a client reads), one per distinct shape, at most three signals."""
import struct
import sys

data = open(sys.argv[1], "rb").read()
seen, i, n = set(), 0, 0
while i + 16 <= len(data):
    end = "<" if data[i : i + 1] == b"l" else ">"
    body, _, fields = struct.unpack(end + "III", data[i + 4 : i + 16])
    size = (16 + fields + 7) // 8 * 8 + body
    m = data[i : i + size]
    i += size
    # The shape: type, length, body end (serials differ between otherwise equal ones); the bus's
    # signals (NameOwnerChanged, NameAcquired, NameLost) differ only in names: three of them.
    key = (m[1], len(m), m[-24:]) if m[1] != 4 else (4, min(n, 3))
    if m[1] in (2, 3, 4) and len(m) < 600 and key not in seen:
        seen.add(key)
        open(f"{sys.argv[2]}/{['', 'call', 'return', 'error', 'signal'][m[1]]}-{n}.bin", "wb").write(m)
        n += 1

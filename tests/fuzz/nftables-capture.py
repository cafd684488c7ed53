# Capture nf_tables dumps as the kernel sends them, for the `nftables` fuzz seeds: run inside a
# throwaway network namespace holding a table made by nft(8) (see tests/fuzz/README.md):
#   unshare -n sh -c 'nft -f RULESET.nft && cd tests/fuzz/nftables && python3 ../nftables-capture.py'
import socket, struct
NETLINK_NETFILTER = 12
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
s.bind((0, 0))
s.settimeout(2)
def dump(msg, name, family=0):
    ty = (10 << 8) | msg                                   # NFNL_SUBSYS_NFTABLES
    body = struct.pack("=BBH", family, 0, 0)               # nfgenmsg
    s.send(struct.pack("=IHHII", 16 + len(body), ty, 0x301, 1, 0) + body)
    out = []
    while True:
        d = s.recv(65536)
        out.append(d)
        off, done = 0, False
        while off + 16 <= len(d):
            l, t = struct.unpack_from("=IH", d, off)
            if t in (2, 3): done = True
            if l < 16: break
            off += (l + 3) & ~3
        if done: break
    for i, d in enumerate(out[:2]):
        open(f"{name}-{i}.bin", "wb").write(d)
    return [len(d) for d in out]
print(dump(4, "chains"), dump(7, "rules"))             # NFT_MSG_GETCHAIN, NFT_MSG_GETRULE

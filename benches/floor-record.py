#!/usr/bin/env python3
"""Turn an strace recording of one benchmark sample into the floor's replay script.

    floor-record.py TRACE_DIR OURS_DIR CONTAINER_NETNS PLUGIN... > SCRIPT

TRACE_DIR holds `strace -ff -ttt -qq -xx -e write=all -e read=all -o TRACE_DIR/t` of one
benches/chain.sh run (ADD of PLUGIN... in order, then DEL in reverse; `=NAME` marks a plugin
that runs untimed). Every process that execs OURS_DIR/<applet> is one plugin run; processes it
starts (a delegate it execs) are merged into it by timestamp. Kept: what reaches the kernel on
the plugin's behalf — netlink sockets and their messages (byte for byte, with the replies the
kernel gave, which the replayer uses to map interface indexes and nf_tables handles), file and
/proc/sys operations, namespace switches, tap ioctls. Dropped: process plumbing (execve, mmap,
signals, reading the config from stdin, writing the result to stdout, pipes to a delegate,
exit), which is what the floor leaves out by definition. See benches/NOTES.md ("The floor").
A child a plugin forks without exec (cnibox's DEL sends a link deletion from one and does not
wait for it) is replayed like a thread that never exits: concurrently, sharing the plugin's
descriptors, and outside the plugin's time (the runtime does not wait for it either).

    floor-record.py --go TRACE_DIR REF_DIR CONTAINER_NETNS PLUGIN... > SCRIPT

The same for a recording of the reference (Go) plugins in REF_DIR: the floor of the Go plugin's
own choices. Go runs a plugin on many threads and switches namespaces per thread (a goroutine
locks its thread, setns, works, setns back), so the calls of every thread of every process of
one plugin run (the plugin, the IPAM plugin it execs, an iptables it runs) are merged into one
stream in recorded time order, and the namespace each recorded thread was in when it made a
call is followed: where the stream passes from a thread in one namespace to a thread in the
other, the script switches (`netns N|C`), which the replayer does with one setns. Go's
/proc/PID/task/TID/ns/net opens become /proc/thread-self/ns/net. Dropped besides the plumbing
above: the runtime's own calls (epoll, futex, nanosleep, the transparent-huge-page probe), the
dynamic loader's opens of an exec'd program, pipes to a child and their descriptors.
"""
import os
import re
import sys

LINE = re.compile(r'^(\d+\.\d+) (\w+)\((.*)\) += (-?\d+|\?|0x[0-9a-f]+)(?: (\w+))?')
HEXSTR = re.compile(r'"((?:\\x[0-9a-f]{2})*)"')
SKIP = {  # process plumbing and memory management: not replayed
    'mmap', 'munmap', 'mprotect', 'brk', 'rt_sigaction', 'rt_sigprocmask', 'sigaltstack',
    'arch_prctl', 'set_tid_address', 'rseq', 'prlimit64', 'set_robust_list', 'fcntl', 'poll',
    'execve', 'exit_group', 'getpid', 'getrandom', 'clone', 'clone3', 'vfork', 'wait4', 'pipe2',
    'dup2', 'futex', 'madvise', 'sched_getaffinity', 'getuid', 'geteuid', 'getgid', 'getegid',
    'gettid', 'uname', 'clock_gettime', 'mremap', 'exit', 'kill', 'tgkill', 'rt_sigreturn',
    'getcwd', 'sysinfo',
    # Go's runtime and os/exec (--go)
    'epoll_create1', 'eventfd2', 'epoll_ctl', 'epoll_pwait', 'epoll_pwait2', 'epoll_wait', 'nanosleep',
    'clock_nanosleep', 'sched_yield', 'mincore', 'getppid', 'waitid', 'pidfd_open',
    'pidfd_send_signal', 'prctl', 'dup3', 'close_range', 'getpgrp', 'capget', 'getrlimit',
    'setrlimit', 'timer_create', 'timer_settime', 'timer_delete', 'rt_sigtimedwait',
}
# Opens that are a process's start-up, not work asked for: the dynamic loader; Go's runtime
# (the huge-page probe, and the cgroup CPU limit it sizes GOMAXPROCS by).
PLUMBING_PATH = re.compile(r'(\.so(\.[\d.]+)?$|^/etc/ld\.so\.|/transparent_hugepage/'
                           r'|^/proc/self/(maps|cgroup|mountinfo)$|^/sys/fs/cgroup/.*cpu\.(cfs_|max))')
NS_PATH = re.compile(r'^/proc/(self|thread-self|\d+)(?:/task/(\d+))?/ns/net$')
O_FLAGS = {'O_RDONLY': 0, 'O_WRONLY': 1, 'O_RDWR': 2, 'O_CREAT': 0o100, 'O_EXCL': 0o200,
           'O_NOCTTY': 0o400, 'O_TRUNC': 0o1000, 'O_APPEND': 0o2000, 'O_NONBLOCK': 0o4000,
           'O_DIRECTORY': 0o200000, 'O_NOFOLLOW': 0o400000, 'O_CLOEXEC': 0o2000000,
           'O_LARGEFILE': 0, 'O_PATH': 0o10000000, 'O_SYNC': 0o4010000, 'O_DSYNC': 0o10000}
CONST = {'AF_NETLINK': 16, 'AF_INET': 2, 'AF_INET6': 10, 'AF_UNIX': 1, 'AF_PACKET': 17,
         'SOCK_DGRAM': 2, 'SOCK_RAW': 3, 'SOCK_STREAM': 1, 'SOCK_CLOEXEC': 0o2000000,
         'SOCK_NONBLOCK': 0o4000, 'NETLINK_ROUTE': 0, 'NETLINK_NETFILTER': 12,
         'NETLINK_GENERIC': 16, 'NETLINK_AUDIT': 9, 'NETLINK_SOCK_DIAG': 4,
         'SOL_SOCKET': 1, 'SOL_NETLINK': 270, 'NETLINK_EXT_ACK': 11, 'NETLINK_CAP_ACK': 10,
         'NETLINK_GET_STRICT_CHK': 12, 'NETLINK_NO_ENOBUFS': 5, 'NETLINK_ADD_MEMBERSHIP': 1,
         'NETLINK_DROP_MEMBERSHIP': 2,
         'SO_RCVTIMEO_OLD': 20, 'SO_SNDTIMEO_OLD': 21, 'SO_RCVTIMEO_NEW': 66, 'SO_RCVBUF': 8,
         'SO_SNDBUF': 7, 'SO_RCVBUFFORCE': 33, 'SO_SNDBUFFORCE': 32, 'SO_RCVTIMEO': 20,
         'CLONE_NEWNET': 0x40000000, 'LOCK_SH': 1, 'LOCK_EX': 2, 'LOCK_NB': 4, 'LOCK_UN': 8,
         'MSG_TRUNC': 0x20, 'MSG_PEEK': 2, 'MSG_DONTWAIT': 0x40, 'MSG_WAITALL': 0x100,
         'AT_FDCWD': -100, 'AT_REMOVEDIR': 0x200, 'AT_SYMLINK_NOFOLLOW': 0x100,
         'AT_EMPTY_PATH': 0x1000, 'AT_STATX_SYNC_AS_STAT': 0, 'STATX_BASIC_STATS': 0x7ff,
         'STATX_ALL': 0xfff, 'F_OK': 0, 'R_OK': 4, 'W_OK': 2, 'X_OK': 1}
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000
# --go: the tap a process asked for by name (Go's tap plugin runs `ip tuntap add … name N`,
# whose TUNSETIFF strace does not decode): process → name, from its argv.
TAP_NAME = {}


def flags(expr, table=CONST):
    v = 0
    for part in expr.split('|'):
        part = part.strip()
        if part in table:
            v |= table[part]
        elif part in O_FLAGS:
            v |= O_FLAGS[part]
        elif re.fullmatch(r'-?(0x[0-9a-f]+|\d+)', part):
            v |= int(part, 0)
        elif re.fullmatch(r'0\d+', part):
            v |= int(part, 8)
        else:
            raise ValueError(f'unknown constant {part!r} in {expr!r}')
    return v


def unhex(s):
    return bytes.fromhex(s.replace('\\x', ''))


def split_args(a):
    """Top-level comma split of an strace argument list (brackets and quotes nest)."""
    out, depth, cur, q = [], 0, '', False
    for ch in a:
        if q:
            cur += ch
            if ch == '"':
                q = False
            continue
        if ch == '"':
            q = True
        elif ch in '[{(':
            depth += 1
        elif ch in ']})':
            depth -= 1
        elif ch == ',' and depth == 0:
            out.append(cur.strip())
            cur = ''
            continue
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse(path):
    """[(ts, name, args, ret, errno, dump_bytes)] of one strace -ff file."""
    calls = []
    for line in open(path, encoding='latin-1'):
        if line.startswith(' | '):
            if calls:
                calls[-1][5].extend(bytes.fromhex(''.join(line[10:59].split())))
            continue
        m = LINE.match(line)
        if not m:
            continue
        ts, name, args, ret, err = m.groups()
        calls.append([float(ts), name, args, ret, err, bytearray()])
    return calls


def main():
    args = sys.argv[1:]
    go = args[:1] == ['--go']
    if go:
        args = args[1:]
    tdir, ours, cns, plugins = args[0], args[1].rstrip('/'), args[2], args[3:]
    cns_hex = cns.encode().hex()
    files = {int(f.split('.')[-1]): parse(os.path.join(tdir, f)) for f in os.listdir(tdir)
             if re.fullmatch(r't\.\d+', f)}
    parent, start, exe, other, threads = {}, {}, {}, {}, {}
    for pid, calls in files.items():
        for c in calls:
            if c[1] in ('clone', 'clone3', 'vfork', 'fork') and c[3].lstrip('-').isdigit() and int(c[3]) > 0:
                parent[int(c[3])] = pid
                if 'CLONE_THREAD' in c[2]:
                    threads[int(c[3])] = pid
            if c[1] == 'execve' and c[3] == '0':
                p = unhex(HEXSTR.search(c[2]).group(1)).decode()
                if os.path.dirname(p) == ours:
                    exe[pid] = os.path.basename(p)
                    start[pid] = c[0]
                else:
                    other[pid] = p
    def leader(t):
        while t in threads:
            t = threads[t]
        return t
    # A plugin another plugin exec'd (an IPAM plugin) is not a run of its own; Go execs it
    # from any of its threads.
    tops = sorted((p for p in exe if leader(parent.get(p)) not in exe), key=lambda p: start[p])
    want = len(plugins) * 2
    if len(tops) != want:
        sys.exit(f'floor-record: {len(tops)} plugin runs in the trace, expected {want}')
    order = [(p, 'ADD') for p in plugins] + [(p, 'DEL') for p in reversed(plugins)]
    skipped, out = {}, []
    for top, (plug, verb) in zip(tops, order):
        if exe[top] != plug.lstrip('='):
            sys.exit(f'floor-record: run of {exe[top]} where {plug} was expected')
        members = [top]
        for p in sorted(parent):  # descendants of top (delegates it ran)
            q = p
            while q in parent and q != top:
                q = parent[q]
            if q == top and p != top:
                if p in other and not go:
                    sys.exit(f'floor-record: {exe[top]} runs {other[p]}: the floor replays only '
                             'what cnibox itself asks of the kernel')
                members.append(p)
        out.append(f'seg {verb} {0 if plug.startswith("=") else 1} {plug.lstrip("=")}')
        if go:
            out.extend(go_stream(members, files, exe, other, threads, leader, cns_hex, skipped))
            continue
        forked = {p for p in members if p != top and p not in exe and p not in threads}
        ops = []
        for m, pid in enumerate(members):
            seen = pid not in exe  # ops before the process exec'd an applet are bash's own
            for i, c in enumerate(files[pid]):
                if c[1] == 'execve' and pid in exe and c[3] == '0':
                    seen = True
                    continue
                if seen:
                    ops.append((c[0], m, i, pid, c))
            if pid not in forked:
                ops.append((files[pid][-1][0] if files[pid] else 0, m, 1 << 30, pid, None))
        ops.sort(key=lambda o: o[:3])
        for _, _, _, pid, c in ops:
            if c is None:
                out.append(f'exit {pid}')
                continue
            if c[1] in ('fork', 'vfork', 'clone', 'clone3') and c[3].isdigit() and int(c[3]) in forked:
                # Started from the process (a fork from one of its threads too), whose
                # descriptors it shares.
                leader = pid
                while leader in threads:
                    leader = threads[leader]
                out.append(f'thread {leader} {c[3]}')
                continue
            line = convert(pid, c, cns_hex, skipped)
            if line:
                out.append(line)
    print('\n'.join(out))
    if skipped:
        print('floor-record: not replayed: ' + ', '.join(f'{k} x{v}' for k, v in sorted(skipped.items())),
              file=sys.stderr)


def go_stream(members, files, exe, other, threads, leader, cns_hex, skipped):
    """--go: the calls of one plugin run, every thread and process of it, in one time-ordered
    stream on the replayer's one thread, with a `netns` switch wherever the next call was made
    by a recorded thread in the other namespace (see the module's doc)."""
    ops = []
    for m, pid in enumerate(members):
        seen = pid not in exe and pid not in other  # a process's calls before its exec: not its
        for i, c in enumerate(files[pid]):
            if c[1] == 'execve' and c[3] == '0' and (pid in exe or pid in other):
                seen = True
                argv = [unhex(h).decode('latin-1') for h in HEXSTR.findall(c[2])][1:]
                if 'tuntap' in argv and 'name' in argv[:-1]:
                    TAP_NAME[pid] = argv[argv.index('name') + 1]
                continue
            if seen:
                ops.append((c[0], m, i, pid, c))
    ops.sort(key=lambda o: o[:3])
    last = {}
    for k, o in enumerate(ops):
        last[leader(o[3])] = k
    ns = {members[0]: 'N'}  # recorded thread → the namespace it is in
    state = {'fdns': {}, 'dropped': set(), 'cur': 'N'}
    out = []
    for k, (_, _, _, pid, c) in enumerate(ops):
        out.extend(go_call(pid, leader(pid), c, ns, state, cns_hex, skipped))
        if last.get(leader(pid)) == k:
            out.append(f'exit {leader(pid)}')
    return out


def go_call(pid, proc, c, ns, state, cns_hex, skipped):
    """One recorded call of thread `pid` of process `proc` (--go): its script lines."""
    fdns, dropped = state['fdns'], state['dropped']
    name, args, ret = c[1], c[2], c[3]
    a = split_args(args)
    ok = not ret.startswith('-') and ret != '?'
    if name in ('clone', 'clone3', 'fork', 'vfork'):
        if ret.isdigit():
            ns[int(ret)] = ns.get(pid, 'N')  # a thread or child starts where its creator is
        return []
    if name == 'pipe2':
        if ok:
            dropped.update((proc, int(f)) for f in re.findall(r'\d+', a[0]))
        return []
    if name == 'setns':
        if ok:
            ns[pid] = fdns.get((proc, int(a[0])), '?')
        return []
    want = ns.get(pid, 'N')
    if name in ('open', 'openat') and ok:
        i = 1 if name == 'openat' else 0
        p = unhex(HEXSTR.match(a[i]).group(1)).decode('latin-1')
        fd = int(ret)
        if PLUMBING_PATH.search(p):
            dropped.add((proc, fd))
            return []
        if p.encode('latin-1').hex() == cns_hex:
            fdns[(proc, fd)] = 'C'
        elif (g := NS_PATH.match(p)):
            who = pid if g.group(1) in ('self', 'thread-self') else int(g.group(2) or g.group(1))
            want = fdns[(proc, fd)] = ns.get(who, want)
            here = ''.join(f'\\x{b:02x}' for b in b'/proc/thread-self/ns/net')
            c = list(c)
            c[2] = args.replace(a[i], f'"{here}"', 1)
    if a and re.fullmatch(r'\d+', a[0]) and (proc, int(a[0])) in dropped:
        if name == 'close':
            dropped.discard((proc, int(a[0])))
        return []
    if name == 'close':
        fdns.pop((proc, int(a[0])), None)
    line = convert(proc, c, cns_hex, skipped)
    if not line:
        return []
    out = []
    if want != '?' and want != state['cur']:
        if want in ('N', 'C'):
            out.append(f'netns 0 {want}')
        else:  # a namespace the plugin made (unshare): through a descriptor it holds of it
            fd = next((f for (p, f), n in fdns.items() if p == proc and n == want), None)
            if fd is None:
                skipped['switch to a namespace no descriptor holds'] = skipped.get('switch to a namespace no descriptor holds', 0) + 1
            else:
                out.append(f'setns {proc} {fd} {CONST["CLONE_NEWNET"]}')
        state['cur'] = want
    if name == 'unshare' and ok and 'CLONE_NEWNET' in args:
        state['made'] = state.get('made', 0) + 1
        ns[pid] = state['cur'] = f'U{state["made"]}'
    return out + [line]


def path_tok(s, cns_hex):
    h = unhex(s).hex()
    return '@C' if h == cns_hex else (h or '-')


def convert(pid, c, cns_hex, skipped):
    ts, name, args, ret, err, dump = c
    a = split_args(args)
    ok = not ret.startswith('-')
    P = lambda i: path_tok(HEXSTR.match(a[i]).group(1), cns_hex)
    try:
        if name in ('clone', 'clone3') and 'CLONE_THREAD' in args and ok and ret.isdigit():
            return f'thread {pid} {ret}'  # the replayer runs the thread's ops on a thread
        if name in SKIP:
            return None
        if name == 'socket':
            return ok and f'socket {pid} {ret} {flags(a[0])} {flags(a[1])} {flags(a[2])}'
        if name == 'socketpair':
            sv = re.findall(r'\d+', a[3])
            return ok and f'socketpair {pid} {sv[0]} {sv[1]} {flags(a[0])} {flags(a[1])}'
        if name == 'sendmsg' and 'SCM_RIGHTS' in args:  # descriptors handed over a unix socket
            fds = re.search(r'cmsg_data=\[([\d, ]*)\]', args).group(1).replace(',', ' ').split()
            data = unhex(re.search(r'iov_base="((?:\\x[0-9a-f]{2})*)"', args).group(1))
            return f'sendfds {pid} {a[0]} {data.hex() or "-"} {" ".join(fds)}'
        if name == 'bind':
            g = re.search(r'nl_groups=([0-9a-f]+)', a[1])
            return f'bind {pid} {a[0]} {int(g.group(1), 16) if g else 0}'
        if name in ('connect', 'getsockname'):
            return f'{name} {pid} {a[0]}'
        if name == 'setsockopt':
            v = a[3]
            if v.startswith('['):
                b = int(v.strip('[]'), 0).to_bytes(4, 'little', signed=True)
            else:
                b = unhex(HEXSTR.match(v).group(1))
            return f'setsockopt {pid} {a[0]} {flags(a[1])} {flags(a[2])} {b.hex()}'
        if name in ('sendto', 'sendmsg', 'write', 'pwrite64'):
            if int(a[0]) <= 2 and name == 'write':
                return None  # the result on stdout, messages on stderr
            data = bytes(dump)
            if name == 'sendmsg':
                return f'send {pid} {a[0]} 0 {data.hex()}'
            if name == 'sendto':
                return f'send {pid} {a[0]} {flags(a[3])} {data.hex()}'
            if name == 'pwrite64':
                return f'pwrite {pid} {a[0]} {a[3]} {data.hex()}'
            return f'write {pid} {a[0]} {data.hex() or "-"}'
        if name in ('recvfrom', 'recvmsg'):
            fl = flags(a[3]) if name == 'recvfrom' else flags(a[2])
            return f'recv {pid} {a[0]} {fl} {bytes(dump).hex() if ok else "-"}'
        if name in ('read', 'pread64'):
            if int(a[0]) == 0:
                return None  # the config on stdin
            if name == 'pread64':
                return f'pread {pid} {a[0]} {a[2]} {a[3]}'
            return f'read {pid} {a[0]} {a[2]}'
        if name in ('open', 'openat'):
            i = 1 if name == 'openat' else 0
            if name == 'openat' and a[0] != 'AT_FDCWD':
                raise ValueError('openat relative to a directory fd')
            mode = int(a[i + 2], 8) if len(a) > i + 2 else 0
            return f'open {pid} {ret if ok else -1} {flags(a[i + 1], O_FLAGS)} {mode} {P(i)}'
        if name == 'close':
            return f'close {pid} {a[0]}'
        if name in ('stat', 'lstat', 'statfs', 'access', 'rmdir', 'unlink', 'readlink'):
            return f'{name} {pid} {P(0)}'
        if name in ('newfstatat', 'statx', 'unlinkat', 'faccessat', 'faccessat2', 'mkdirat'):
            if a[0] != 'AT_FDCWD':
                if name in ('newfstatat', 'statx') and 'AT_EMPTY_PATH' in a[3 if name == 'newfstatat' else 2]:
                    return f'fstat {pid} {a[0]}'
                raise ValueError(f'{name} relative to a directory fd')
            if name == 'unlinkat':
                return f'{"rmdir" if "AT_REMOVEDIR" in a[2] else "unlink"} {pid} {P(1)}'
            if name == 'mkdirat':
                return f'mkdir {pid} {P(1)} {int(a[2], 8)}'
            if name in ('faccessat', 'faccessat2'):
                return f'access {pid} {P(1)}'
            return f'{"lstat" if "AT_SYMLINK_NOFOLLOW" in a[2] else "stat"} {pid} {P(1)}'
        if name in ('fstat', 'fstatfs', 'fsync', 'fdatasync', 'getdents64'):
            return f'{name} {pid} {a[0]}'
        if name == 'mkdir':
            return f'mkdir {pid} {P(0)} {int(a[1], 8)}'
        if name in ('rename', 'link', 'symlink'):
            return f'{name} {pid} {P(0)} {P(1)}'
        if name in ('renameat', 'renameat2', 'linkat'):
            if a[0] != 'AT_FDCWD' or a[2] != 'AT_FDCWD':
                raise ValueError(f'{name} relative to a directory fd')
            return f'{"link" if name == "linkat" else "rename"} {pid} {P(1)} {P(3)}'
        if name == 'utimensat':
            t = [int(x) for x in re.findall(r'tv_(?:sec|nsec)=(\d+)', a[2])] or [0, (1 << 30) - 1] * 2
            target = '-' if a[1] == 'NULL' else P(1)
            return f'utimens {pid} {flags(a[0])} {target} {" ".join(map(str, t[:4]))}'
        if name == 'flock':
            return f'flock {pid} {a[0]} {flags(a[1])}'
        if name == 'setns':
            return f'setns {pid} {a[0]} {flags(a[1])}'
        if name == 'unshare':
            return f'unshare {pid} {flags(a[0])}'
        if name == 'ioctl':
            if a[1] == 'TUNSETIFF':  # strace does not decode the ifreq: cnibox's tap asks the
                name = TAP_NAME.get(pid, '').encode().hex()  # kernel for tap%d, Go's a name
                return f'tunsetiff {pid} {a[0]} {IFF_TAP | IFF_NO_PI} {name}'.rstrip()
            if a[1] in ('TUNSETPERSIST', 'TUNSETOWNER', 'TUNSETGROUP'):
                n = {'TUNSETPERSIST': 0x400454cb, 'TUNSETOWNER': 0x400454cc, 'TUNSETGROUP': 0x400454ce}
                return f'ioctlint {pid} {a[0]} {n[a[1]]} {int(a[2], 0)}'
            if a[1] == 'FIONBIO':
                return None  # on a pipe to a delegate
            raise ValueError('ioctl ' + a[1])
    except (ValueError, AttributeError, IndexError) as e:
        skipped[f'{name} ({e})'] = skipped.get(f'{name} ({e})', 0) + 1
        return None
    skipped[name] = skipped.get(name, 0) + 1
    return None


if __name__ == '__main__':
    main()

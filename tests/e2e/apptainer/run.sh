#!/bin/sh
# Runs apptainer from the Debian unstable root (tests/e2e/apptainer/root.sh) for one test:
#   run.sh ROOT DIR ARG...    ->  chroot ROOT apptainer ARG...
# in a mount namespace of its own (the caller's, made by `ip netns exec NODE`, whose /sys is the
# node's), with the root's view made of the machine's /proc, /sys and /dev plus the test's
# private dirs: DIR/etc/apptainer.conf over the root's (its `cni plugin path` and `cni
# configuration path` point into DIR), DIR/var-lib-cni on /var/lib/cni (libcni's cache,
# host-local's reservations, cnibox's records), DIR/tmp on /tmp (which apptainer binds into the
# container), DIR on /mnt (plugins, conflists, image). Nothing of it outlives the namespace.
set -eu
root=$1 dir=$2
shift 2
mount --make-rprivate /
# The root a mount point of its own: apptainer sets the propagation of the / it sees.
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount --bind "$dir" "$root/mnt"
mount --bind "$dir/tmp" "$root/tmp"
mount --bind "$dir/var-lib-cni" "$root/var/lib/cni"
mount --bind "$dir/etc/apptainer.conf" "$root/etc/apptainer/apptainer.conf"
# pivot_root, not chroot: apptainer refuses to run in a chroot. `pivot_root . .` stacks the old
# root over the new one; the lazy unmount drops it.
cd "$root"
pivot_root . .
umount -l .
cd /
exec /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/mnt/home \
    /usr/bin/apptainer "$@"

#!/usr/bin/env python3
"""Pod sandbox life cycles through containerd's CRI, timed as kubelet sees them (benches/cri.sh):

    cri-bench.py SOCK PREFIX COUNT PARALLEL PORTBASE

COUNT pods, PARALLEL at a time (worker threads, each its own hostPort PORTBASE+worker →
80/tcp, and the bandwidth annotations): RunPodSandbox, StopPodSandbox, RemovePodSandbox per
pod. Prints {"wall_ns", "run_ns": [...], "stop_remove_ns": [...], "errors": [...]}. The CRI
client (gRPC stubs, run_pod) is the end-to-end test's, tests/e2e/cri/cri.py."""

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e", "cri"))
import cri  # noqa: E402


def main(argv):
    sock, prefix, count, parallel, portbase = argv[1], argv[2], int(argv[3]), int(argv[4]), int(argv[5])
    pb, rt = cri.client(sock)
    run_ns, stop_ns, errors = [], [], []
    lock = threading.Lock()
    todo = list(range(count))

    def worker(w):
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            try:
                t0 = time.monotonic_ns()
                pod = cri.run_pod(pb, rt, "%s-%d" % (prefix, i), ["%d:80/tcp" % (portbase + w)],
                                  "10M", "10M")
                t1 = time.monotonic_ns()
                rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=pod), timeout=120)
                rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=pod), timeout=120)
                t2 = time.monotonic_ns()
                with lock:
                    run_ns.append(t1 - t0)
                    stop_ns.append(t2 - t1)
            except Exception as e:  # reported by cri.sh
                with lock:
                    errors.append("%d: %s" % (i, e))

    t = time.monotonic_ns()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(parallel)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    print(json.dumps({"wall_ns": time.monotonic_ns() - t, "run_ns": run_ns,
                      "stop_remove_ns": stop_ns, "errors": errors}))


if __name__ == "__main__":
    main(sys.argv)

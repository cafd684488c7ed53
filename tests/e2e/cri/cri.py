#!/usr/bin/env python3
"""A small CRI client for the containerd end-to-end test (tests/e2e_cri.rs): it calls the
RuntimeService of a private containerd over its unix socket as kubelet does, and builds the
sandbox image. Every command prints one JSON document on stdout.

    cri.py build-image PAUSE_BINARY NAME OUT.tar      OCI image archive holding /pause
    cri.py SOCK version
    cri.py SOCK run NAME [--port HOST:CONTAINER/PROTO]... [--ingress RATE] [--egress RATE]
    cri.py SOCK run-many PREFIX COUNT                 COUNT pods at once (threads)
    cri.py SOCK status ID                             {"state", "ip", "ips", "netns", "dns"}
    cri.py SOCK runtime-status                        {"conditions": {TYPE: {...}}, "networks"}
    cri.py SOCK stop ID | remove ID | list

The protobuf module is generated at run time from cri.proto (grpcio-tools) into
$CRI_PY_OUT (a temp dir the test owns)."""

import hashlib
import io
import json
import os
import sys
import tarfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))


def build_image(pause, name, out):
    """An OCI image layout archive: one layer with /pause, a config whose entrypoint is it."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as t:
        info = t.gettarinfo(pause, arcname="pause")
        info.mode, info.uid, info.gid, info.uname, info.gname = 0o755, 0, 0, "", ""
        with open(pause, "rb") as f:
            t.addfile(info, f)
    layer = layer.getvalue()

    def blob(data):
        return "sha256:" + hashlib.sha256(data).hexdigest(), data

    layer_digest, _ = blob(layer)
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": ["/pause"]},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }).encode()
    config_digest, _ = blob(config)
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": layer_digest, "size": len(layer)}],
    }).encode()
    manifest_digest, _ = blob(manifest)
    index = json.dumps({
        "schemaVersion": 2,
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": manifest_digest, "size": len(manifest),
                       "annotations": {"io.containerd.image.name": name,
                                       "org.opencontainers.image.ref.name": name}}],
    }).encode()
    with tarfile.open(out, "w") as t:
        def add(path, data):
            i = tarfile.TarInfo(path)
            i.size, i.mode = len(data), 0o644
            t.addfile(i, io.BytesIO(data))
        add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add("index.json", index)
        for digest, data in [(layer_digest, layer), (config_digest, config),
                             (manifest_digest, manifest)]:
            add("blobs/sha256/" + digest.split(":")[1], data)
    return {"image": name, "manifest": manifest_digest}


def stubs():
    out = os.environ["CRI_PY_OUT"]
    if not os.path.exists(os.path.join(out, "cri_pb2_grpc.py")):
        from grpc_tools import protoc
        rc = protoc.main(["protoc", "-I" + HERE, "--python_out=" + out,
                          "--grpc_python_out=" + out, os.path.join(HERE, "cri.proto")])
        if rc != 0:
            raise SystemExit("protoc failed")
    sys.path.insert(0, out)
    import cri_pb2
    import cri_pb2_grpc
    return cri_pb2, cri_pb2_grpc


def client(sock):
    import grpc
    pb, pb_grpc = stubs()
    channel = grpc.insecure_channel("unix://" + sock)
    grpc.channel_ready_future(channel).result(timeout=60)
    return pb, pb_grpc.RuntimeServiceStub(channel)


def run_pod(pb, rt, name, ports=(), ingress=None, egress=None):
    annotations = {}
    if ingress:
        annotations["kubernetes.io/ingress-bandwidth"] = ingress
    if egress:
        annotations["kubernetes.io/egress-bandwidth"] = egress
    mappings = []
    for p in ports:
        hc, proto = p.split("/")
        host, cont = hc.split(":")
        mappings.append(pb.PortMapping(protocol=pb.Protocol.Value(proto.upper()),
                                       host_port=int(host), container_port=int(cont)))
    config = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=name, uid="uid-" + name, namespace="e2e",
                                       attempt=0),
        hostname=name, port_mappings=mappings, annotations=annotations,
        linux=pb.LinuxPodSandboxConfig(cgroup_parent=""))
    return rt.RunPodSandbox(pb.RunPodSandboxRequest(config=config), timeout=120).pod_sandbox_id


def status(pb, rt, pod):
    r = rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=pod, verbose=True),
                            timeout=60)
    netns = ""
    info = json.loads(r.info.get("info", "{}") or "{}")
    for ns in info.get("runtimeSpec", {}).get("linux", {}).get("namespaces", []):
        if ns.get("type") == "network":
            netns = ns.get("path", "")
    net = r.status.network
    # The DNS of the CNI results (go-cni's Result, one entry per network: loopback's is empty).
    dns = [d for d in (info.get("cniResult") or {}).get("DNS") or [] if d]
    return {"id": r.status.id, "state": pb.PodSandboxState.Name(r.status.state),
            "ip": net.ip, "ips": [net.ip] + [i.ip for i in net.additional_ips],
            "netns": netns, "dns": dns}


def runtime_status(pb, rt):
    """The conditions kubelet reads (RuntimeReady, NetworkReady: status, reason, message) and
    the names of the CNI networks the CRI plugin has loaded (its verbose `cniconfig`)."""
    r = rt.Status(pb.StatusRequest(verbose=True), timeout=60)
    conditions = {c.type: {"status": c.status, "reason": c.reason, "message": c.message}
                  for c in r.status.conditions}
    cni = json.loads(r.info.get("cniconfig", "null") or "null") or {}
    networks = [n["Config"]["Name"] for n in cni.get("Networks") or []]
    return {"conditions": conditions, "networks": networks}


def main(argv):
    if argv[1] == "build-image":
        print(json.dumps(build_image(argv[2], argv[3], argv[4])))
        return
    sock, cmd, args = argv[1], argv[2], argv[3:]
    pb, rt = client(sock)
    if cmd == "version":
        v = rt.Version(pb.VersionRequest(version="v1"), timeout=60)
        out = {"runtime": v.runtime_name, "version": v.runtime_version,
               "api": v.runtime_api_version}
    elif cmd == "run":
        name, ports, ingress, egress = args[0], [], None, None
        i = 1
        while i < len(args):
            flag, val = args[i], args[i + 1]
            if flag == "--port":
                ports.append(val)
            elif flag == "--ingress":
                ingress = val
            elif flag == "--egress":
                egress = val
            else:
                raise SystemExit("unknown flag " + flag)
            i += 2
        out = {"id": run_pod(pb, rt, name, ports, ingress, egress)}
    elif cmd == "run-many":
        prefix, count = args[0], int(args[1])
        ids, errors = [None] * count, []

        def one(i):
            try:
                ids[i] = run_pod(pb, rt, "%s-%d" % (prefix, i))
            except Exception as e:  # reported, the test fails on it
                errors.append("%d: %s" % (i, e))
        threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out = {"ids": ids, "errors": errors}
    elif cmd == "status":
        out = status(pb, rt, args[0])
    elif cmd == "runtime-status":
        out = runtime_status(pb, rt)
    elif cmd == "stop":
        rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=args[0]), timeout=120)
        out = {}
    elif cmd == "remove":
        rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=args[0]), timeout=120)
        out = {}
    elif cmd == "list":
        r = rt.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=60)
        out = {"items": [{"id": p.id, "name": p.metadata.name,
                          "state": pb.PodSandboxState.Name(p.state)} for p in r.items]}
    else:
        raise SystemExit("unknown command " + cmd)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv)

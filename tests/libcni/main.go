// libcni-driver: the conflist path containerd and podman take (libcni's LoadConfList,
// AddNetworkList, CheckNetworkList, DelNetworkList), with upstream cnitool's command line and
// environment, so tests/cnitool.rs can run the same network through libcni and through
// cnibox's cnitool and compare. Built by the test in GOPATH mode over libcni 1.3, Debian
// unstable's golang-github-appc-cni-dev, with unstable's Go (both unpacked by
// .ci/fetch-unstable; GO111MODULE=off, GOPATH=<unpacked>/usr/share/gocode).
//
//	libcni-driver add|check|del NETWORK NETNS
//
// NETCONFPATH, CNI_PATH, CNI_IFNAME, CNI_ARGS, CAP_ARGS as cnitool reads them; CNI_CONTAINERID
// (else cnitool's cnitool-<hash of NETNS>) and CNI_CACHE_DIR as cnibox's cnitool reads them.
// A failure prints {"code","msg"} on stdout (code 0 when libcni's error carries none) and
// exits 1.
package main

import (
	"context"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
)

func fail(err error) {
	code := uint(0)
	var te *types.Error
	if errors.As(err, &te) {
		code = te.Code
	}
	out, _ := json.Marshal(map[string]interface{}{"code": code, "msg": err.Error()})
	fmt.Println(string(out))
	os.Exit(1)
}

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: libcni-driver add|check|del NETWORK NETNS")
		os.Exit(2)
	}
	dir := os.Getenv("NETCONFPATH")
	if dir == "" {
		dir = "/etc/cni/net.d"
	}
	list, err := libcni.LoadConfList(dir, os.Args[2])
	if err != nil {
		fail(err)
	}
	var caps map[string]interface{}
	if s := os.Getenv("CAP_ARGS"); s != "" {
		if err := json.Unmarshal([]byte(s), &caps); err != nil {
			fail(err)
		}
	}
	var args [][2]string
	if s := os.Getenv("CNI_ARGS"); s != "" {
		for _, pair := range strings.Split(s, ";") {
			kv := strings.Split(pair, "=")
			if len(kv) != 2 || kv[0] == "" || kv[1] == "" {
				fail(fmt.Errorf("invalid CNI_ARGS pair %q", pair))
			}
			args = append(args, [2]string{kv[0], kv[1]})
		}
	}
	ifName := os.Getenv("CNI_IFNAME")
	if ifName == "" {
		ifName = "eth0"
	}
	netns, err := filepath.Abs(os.Args[3])
	if err != nil {
		fail(err)
	}
	id := os.Getenv("CNI_CONTAINERID")
	if id == "" {
		s := sha512.Sum512([]byte(netns))
		id = fmt.Sprintf("cnitool-%x", s[:10])
	}
	cni := libcni.NewCNIConfigWithCacheDir(filepath.SplitList(os.Getenv("CNI_PATH")), os.Getenv("CNI_CACHE_DIR"), nil)
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: netns, IfName: ifName, Args: args, CapabilityArgs: caps}
	ctx := context.Background()
	switch os.Args[1] {
	case "add":
		result, err := cni.AddNetworkList(ctx, list, rt)
		if err != nil {
			fail(err)
		}
		_ = result.Print()
	case "check":
		err = cni.CheckNetworkList(ctx, list, rt)
	case "del":
		err = cni.DelNetworkList(ctx, list, rt)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

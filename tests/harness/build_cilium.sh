#!/bin/sh
# Build the cilium/ebpf differential harness offline against the cilium/ebpf release Debian
# packages (golang-github-cilium-ebpf-dev 0.9.1 under /usr/share/gocode, with its dependency
# golang-golang-x-sys-dev), with Debian's Go (golang-go 1.19) in GOPATH mode: no module proxy.
# Output: tests/harness/cilium_maps (not committed).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
GO111MODULE=off GOPATH="/usr/share/gocode:$tmp/gopath" GOFLAGS= GOPROXY=off GOENV=off \
  GOCACHE="$tmp/cache" CGO_ENABLED=0 \
  go build -o "$here/cilium_maps" "$here/cilium_maps.go"

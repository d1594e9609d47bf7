#!/bin/sh
# Build the libbpf differential harness against the system libbpf
# (Debian libbpf-dev 1.1.x). Output: tests/harness/libbpf_maps (not committed).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
CC=${CC:-gcc}
exec "$CC" -O2 -Wall -Wextra -o "$here/libbpf_maps" "$here/libbpf_maps.c" -lbpf

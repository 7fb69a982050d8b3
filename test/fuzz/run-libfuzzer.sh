#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Build one fuzz target with clang's libFuzzer (+ASan +UBSan) and run it.
#
#   test/fuzz/run-libfuzzer.sh [TARGET] [SECONDS] [extra libFuzzer flags...]
#
# TARGET is the part after "fuzz-" (default mux-frames); SECONDS defaults to 60.
# Needs clang-14 and libclang-rt-14-dev. The seed corpus in test/fuzz/corpus/TARGET is read,
# not written: new inputs go to $BERTH_FUZZ_DIR/corpus-TARGET (default: build/libfuzzer/,
# inside the ignored build dir), crashes to $BERTH_FUZZ_DIR/crash-*. Once a crash is fixed,
# copy it into the seed corpus so the gcc replay in `meson test` keeps it fixed.
set -eu

target=${1:-mux-frames}
seconds=${2:-60}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${BERTH_FUZZ_DIR:-$root/build/libfuzzer}
cc=${CLANG:-clang-14}

# The library sources each target needs, and the libraries they link.
libs=
case "$target" in
mux-frames) sources="src/basic/mux.c src/basic/random-util.c" ;;
manifest)
	sources="src/shared/manifest.c src/shared/yaml-json.c src/basic/fileio.c src/basic/utf8.c src/capability/capability.c src/capability/policy.c src/basic/js-quote.c src/basic/parse-util.c"
	libs="-lyaml -ljansson"
	;;
egress-head)
	sources="src/egress-broker/rules.c src/egress-broker/http-head.c src/basic/fileio.c src/basic/host-glob.c src/basic/parse-util.c src/capability/capability.c src/capability/policy.c src/basic/js-quote.c"
	libs="-ljansson"
	;;
egress-request)
	sources="src/berth-vmm/egress-policy.c src/basic/host-glob.c src/basic/parse-util.c"
	libs="-ljansson"
	;;
guest-console)
	sources="src/berth-vmm/vm-diag.c src/basic/line-split.c src/basic/linebuf.c"
	;;
guest-event)
	sources="src/berth-vmm/guest-event.c"
	libs="-ljansson"
	;;
mcp-stdin)
	sources="src/berth/mcp/framing.c src/berth/mcp/tools.c src/berth/mcp/protocol.c src/berth/mcp/methods.c src/basic/line-conn.c src/basic/evloop.c src/basic/log.c src/basic/time-util.c src/basic/parse-util.c src/shared/manifest.c src/shared/yaml-json.c src/basic/fileio.c src/basic/utf8.c src/capability/capability.c src/capability/policy.c src/basic/js-quote.c"
	libs="-lyaml -ljansson -lm"
	;;
denial)
	sources="src/shared/denial.c src/basic/term-text.c src/shared/manifest.c src/shared/yaml-json.c src/basic/fileio.c src/basic/utf8.c src/capability/capability.c src/capability/policy.c src/basic/js-quote.c src/basic/parse-util.c"
	libs="-lyaml -ljansson -lm"
	;;
github-route)
	sources="src/github-broker/routes.c src/capability/capability.c src/capability/policy.c src/basic/utf8.c src/basic/js-quote.c src/basic/fileio.c src/basic/parse-util.c"
	libs="-ljansson -lm"
	;;
github-request)
	sources="src/github-broker/routes.c src/egress-broker/http-head.c src/egress-broker/rules.c src/capability/capability.c src/capability/policy.c src/basic/utf8.c src/basic/js-quote.c src/basic/fileio.c src/basic/host-glob.c src/basic/parse-util.c"
	libs="-ljansson -lm"
	;;
policy)
	sources="src/shared/boot-disk.c src/basic/fileio.c src/capability/capability.c src/capability/policy.c src/basic/js-quote.c src/basic/parse-util.c"
	libs="-ljansson -lm"
	;;
context-bus-frames)
	sources="src/context-bus/frame.c src/context-bus/bus.c src/context-bus/identity.c build/libfuzzer-gen/context_bus.pb-c.c src/basic/evloop.c src/basic/log.c src/basic/time-util.c src/basic/fileio.c src/capability/capability.c src/capability/policy.c src/basic/js-quote.c src/basic/parse-util.c"
	libs="-lprotobuf-c -ljansson -lm"
	;;
ttrpc-frames)
	sources="src/shim/ttrpc-frame.c build/libfuzzer-gen/shim.pb-c.c"
	libs="-lprotobuf-c"
	;;
semantic-fs-request)
	sources="src/semantic-fs/request.c src/semantic-fs/apps.c src/basic/utf8.c src/basic/fileio.c"
	libs="-ljansson"
	;;
view-checks)
	sources="src/terminal-view/auth.c src/terminal-view/message.c"
	;;
view-server)
	sources="src/terminal-view/server.c src/terminal-view/pty.c src/terminal-view/auth.c src/terminal-view/message.c src/basic/fileio.c"
	libs="-lwebsockets"
	;;
*)
	echo "run-libfuzzer.sh: unknown target '$target'; add its sources here" >&2
	exit 2
	;;
esac

if ! command -v "$cc" >/dev/null 2>&1; then
	echo "run-libfuzzer.sh: $cc not found (apt-get install clang-14 libclang-rt-14-dev)" >&2
	exit 77
fi

mkdir -p "$out/corpus-$target"
cd "$root"
# The capability model's tables, as meson generates them.
python3 tools/gen-capability-model.py sdk/capability-model.json "$out/capability-model.h"
# The context bus's protobuf code, as meson generates it from sdk/context_bus.proto.
if [ "$target" = context-bus-frames ]; then
	mkdir -p build/libfuzzer-gen
	protoc-c --proto_path=sdk --c_out=build/libfuzzer-gen sdk/context_bus.proto
fi
if [ "$target" = ttrpc-frames ]; then
	mkdir -p build/libfuzzer-gen
	protoc-c --proto_path=src/shim --c_out=build/libfuzzer-gen src/shim/shim.proto
fi
# shellcheck disable=SC2086
"$cc" -g -O1 -std=gnu17 -D_GNU_SOURCE -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-Isrc/basic -Isrc/include -Isrc/shared -Isrc/egress-broker -Isrc/github-broker -Isrc/berth-vmm -Isrc/berth \
	-Isrc/berth/mcp -Isrc/terminal-view -Isrc/context-bus -Isrc/semantic-fs -Isrc/shim -Ibuild/libfuzzer-gen \
	-Isrc/capability -I"$out" \
	"test/fuzz/fuzz-$target.c" $sources $libs -o "$out/fuzz-$target"

exec "$out/fuzz-$target" -max_total_time="$seconds" -print_final_stats=1 \
	-artifact_prefix="$out/" "$@" "$out/corpus-$target" "test/fuzz/corpus/$target"

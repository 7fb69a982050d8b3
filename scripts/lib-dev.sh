# SPDX-License-Identifier: Apache-2.0
# Running an app with `berth dev` in the background from a script (sourced).
#   dev_start APP_DIR   boots it, waits for "VM ready", prints berth dev's output so far
#   dev_stop            Ctrl-C to berth dev, which stops the VM
berth=${berth:-$PWD/build/src/berth/berth}

dev_start() {
	dev_log=$(mktemp)
	(cd "$1" && exec "$berth" dev >"$dev_log" 2>&1) &
	dev_pid=$!
	trap 'dev_stop; rm -f "$dev_log"' EXIT
	for _ in $(seq 900); do
		grep -q '^VM ready in' "$dev_log" && return 0
		kill -0 $dev_pid 2>/dev/null || { cat "$dev_log"; return 1; }
		sleep 0.2
	done
	cat "$dev_log"
	return 1
}

dev_stop() {
	[ -n "${dev_pid:-}" ] || return 0
	kill -INT "$dev_pid" 2>/dev/null
	wait "$dev_pid" 2>/dev/null || true
	dev_pid=
}

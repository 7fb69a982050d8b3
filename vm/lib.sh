# SPDX-License-Identifier: Apache-2.0
# Helpers shared by the artifact build scripts (sourced, not run).

# Everything the build writes gets this timestamp, so equal inputs give equal bytes.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1700000000}
BERTH_CACHE=${BERTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/berth}
# Files the build writes get their modes from the recipe, not from the caller's umask.
umask 022
berth_vm=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

say() { printf '%s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
now_ms() { date +%s%3N; }

# drift WHAT LOCKED ACTUAL: report, loudly, that Debian's archive moved under a lock.
drift() {
	{
		printf '%s\n' '########################################################################'
		printf '# PIN DRIFT: %s\n#   locked: %s\n#   built:  %s\n' "$1" "$2" "$3"
		printf '%s\n' '# Debian'"'"'s archive moved, or guest code changed. Review, then run vm/repin.'
		printf '%s\n' '########################################################################'
	} >&2
	[ -n "${DRIFT_FILE:-}" ] && printf '%s: locked %s, built %s\n' "$1" "$2" "$3" >> "$DRIFT_FILE"
	return 0
}

# fetch_deb NAME VERSION DIR: download NAME=VERSION, or the candidate when the archive
# no longer serves VERSION (reported as drift). Prints the .deb path.
fetch_deb() {
	local name=$1 version=$2 dir=$3 got
	mkdir -p "$dir"
	got=$(cd "$dir" && ls "${name}_"*.deb 2>/dev/null | head -1 || true)
	if [ -z "$got" ] || ! dpkg-deb -f "$dir/$got" Version | grep -qxF "$version"; then
		rm -f "$dir/${name}_"*.deb
		if ! (cd "$dir" && apt-get download -q "$name=$version" >/dev/null 2>&1); then
			(cd "$dir" && apt-get download -q "$name" >/dev/null) ||
				die "apt-get download $name failed: run 'apt-get update' and check the network to Debian's archive"
		fi
		got=$(cd "$dir" && ls "${name}_"*.deb | head -1)
	fi
	local actual
	actual=$(dpkg-deb -f "$dir/$got" Version)
	[ "$actual" = "$version" ] || drift "$name" "$version" "$actual"
	printf '%s\n' "$dir/$got"
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
size_of() { stat -c %s "$1"; }
# recipe FILE...: one hash of the scripts and lists an artifact is made by. It goes into
# the artifact's tree record, so that a change to them is told apart from a machine's.
recipe() { cat "$@" | sha256sum | cut -c1-16; }
# host_version PACKAGE: the host tool's Debian version, for the tree record's header.
host_version() { dpkg-query -W -f '${Version}' "$1" 2>/dev/null || echo unknown; }

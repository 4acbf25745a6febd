#!/usr/bin/env bash
# Issue 50 on the GPU machine (the `device` tool; root, no network, no Docker, ≤ 64 MiB carried a call): a Docker
# engine from carried Debian packages, an mlcbench image made from the machine's own Python, a suite swept in that
# container on the GPU and with --env local, both stores compared, and every GPU checked to be alone in its container.
#
#   bash benchmarks/gpu_container.sh STEP...        (steps run in the order given; `all`: install through compare)
#
# Steps (each prints what it did, is safe to run again, and stops the script with a message on the first failure):
#   probe      whether this machine could run an engine at all (step 1 of issue 50): privileges, namespaces,
#              cgroups, storage drivers, the GPU's device nodes and driver libraries; prints, changes nothing
#   stage      copy the .deb files carried in .debs/ (any subfolder) to /root/debs: the packages are 67 MB, more
#              than one call carries, so the first call stages .debs/a and the next carries .debs/b
#   install    unpack the packages (dpkg -x) into /root/docker-root, link the libraries the machine lacks
#   dockerd    start dockerd (--iptables=false --bridge=none --storage-driver=overlay2, data under /root/docker-data,
#              log /root/gpu-container/dockerd.log) unless it answers
#   image      the base image mlcbench-base/gpu-host:<hash of its layer>: `docker import` of a tar of the machine's
#              Python (the venv of $PYTHON and the interpreter it is made from), /usr, /etc and the /bin, /sbin, /lib,
#              /lib64 there are; without the NVIDIA driver's libraries, so that the container's CUDA can only come
#              through the passthrough
#   build      `mlcbench build gpu-host` on it (envs/gpu-host: pydantic from .whl, bytecode compiled)
#   check      one container per GPU at once, each must see exactly its own GPU (benchmarks/gpu_container_check.py)
#   sweep      benchmarks/suites/gpu-container.toml in the container (--env gpu-host) into docker.db
#   local      the same suite with --env local into local.db
#   compare    merge both stores into both.db, `mlcbench compare --env gpu-host --env local`, CSV exports
# A sweep is stopped as Ctrl-C stops it after SWEEP_TIMEOUT_S (default 420 s: a call may run 10 minutes, and Ctrl-C
# waits for the job in flight) and the same step resumes it; the step says which. The steps that need the engine start
# dockerd again where an earlier call's is gone. Everything lands in /root/gpu-container and is copied to $OUT.
#
# Calls, as the lead runs them (the machine must stay warm between them: /root holds the engine, images and stores):
#   1. carry .debs/a (docker.io, tini, the libraries dockerd links; 39 MB):   bash benchmarks/gpu_container.sh stage
#   2. carry .debs/b (containerd, runc; 29 MB):   bash benchmarks/gpu_container.sh stage install dockerd image
#   3. carry .whl (9 MB: mlcbench's wheel of this revision, the host side's wheels, and requests for the Docker SDK,
#      which the machine's Python may lack; every later call too):
#        MLCBENCH_GIT_REV=<git rev-parse --short=12 HEAD, here> bash benchmarks/gpu_container.sh build check
#   4. MLCBENCH_GIT_REV=... bash benchmarks/gpu_container.sh sweep   (again until it says every cell is stored)
#   5. the same with `local`, then `compare`
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-/opt/torch/.venv/bin/python3}
# everything under /root, which a machine kept warm between calls still holds (another folder: to try steps elsewhere)
ROOT=${GPU_CONTAINER_ROOT:-/root}
WORK=$ROOT/gpu-container
PREFIX=$ROOT/docker-root
DEBS=$ROOT/debs
BASE_REPOSITORY=mlcbench-base/gpu-host
ENV_NAME=gpu-host
SUITE=benchmarks/suites/gpu-container.toml
OUT=${OUT:-$WORK/out}
PACKAGES=(docker.io containerd runc tini libdevmapper1.02.1 libseccomp2 libsystemd0 libcap2 libgcrypt20 liblzma5
          libzstd1 liblz4-1 libselinux1 libudev1 libgpg-error0 libpcre2-8-0)
mkdir -p "$WORK" "$OUT"
export PATH=$PREFIX/usr/bin:$PREFIX/usr/sbin:$PATH MLCBENCH_ENVS_DIR=$PWD/envs PYTHONUNBUFFERED=1

say() { echo "gpu_container: $*"; }
fail() { echo "gpu_container: FAILED: $*" >&2; exit 1; }
mlcbench_ready() {  # the host side: the carried wheels in /root/site (benchmarks/device_env.sh)
    [ -n "$(ls .whl/*.whl 2>/dev/null)" ] || fail "no .whl/ carried: every call from 'build' on needs it"
    PATH=$(dirname "$PYTHON"):$PATH
    . benchmarks/device_env.sh
    set -euo pipefail
}
engine_ready() { docker info >/dev/null 2>&1 || step_dockerd; }

step_probe() {
    echo "== user and capabilities"; id; grep -E "^Cap(Eff|Bnd)" /proc/self/status
    echo "== kernel"; uname -a
    echo "== namespaces (unshare)"; for ns in --mount --pid --net --user --ipc --uts; do
        if unshare $ns --fork true 2>/dev/null; then echo "unshare $ns: ok"; else echo "unshare $ns: refused"; fi; done
    echo "== cgroups"; mount | grep -E "cgroup" || echo "no cgroup mount"; cat /proc/self/cgroup
    ls /sys/fs/cgroup 2>&1 | head -20; cat /sys/fs/cgroup/cgroup.controllers 2>&1 || true
    echo "== storage drivers"; grep -E "overlay|fuse|btrfs|xfs|ext4" /proc/filesystems || true; df -hT / | tail -1
    local overlay=$WORK/probe-overlay
    mkdir -p "$overlay"/{l,u,w,m}
    if mount -t overlay overlay -o "lowerdir=$overlay/l,upperdir=$overlay/u,workdir=$overlay/w" "$overlay/m" 2>&1; then
        echo "overlay mount: ok"; umount "$overlay/m"; else echo "overlay mount: refused"; fi
    echo "== GPU device nodes"; ls -l /dev/nvidia* 2>&1 || true
    echo "== driver libraries"; ldconfig -p | grep -E "libcuda\.so|libnvidia-ml\.so" | head || true
    ls /usr/local/nvidia 2>&1 | head || true
    echo "== engines present"; for tool in dockerd containerd runc crun podman; do
        command -v $tool || echo "$tool: not installed"; done
    echo "== iptables / bridge"; command -v iptables || echo "iptables: not installed"; ip link 2>&1 | head -5 || true
}

step_stage() {
    mkdir -p "$DEBS"
    local found
    found=$(find .debs -name '*.deb' 2>/dev/null | sort || true)
    [ -n "$found" ] || fail "no .deb carried in .debs/ (carry .debs/a in one call, .debs/b in the next)"
    for deb in $found; do cp "$deb" "$DEBS/"; say "staged $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"; done
    say "$DEBS now holds $(ls "$DEBS" | wc -l) package(s), $(du -sh "$DEBS" | cut -f1)"
}

step_install() {
    for package in "${PACKAGES[@]}"; do
        local deb
        deb=$(ls "$DEBS/${package}_"*.deb 2>/dev/null | head -1 || true)
        [ -n "$deb" ] || fail "$package's .deb is not in $DEBS: stage .debs/a and .debs/b first"
        dpkg -x "$deb" "$PREFIX"
        say "unpacked $(basename "$deb") into $PREFIX"
    done
    # libraries the machine lacks, and only those, from the packages: the rest stay the machine's own
    mkdir -p "$PREFIX/missing-libs"
    local binaries=("$PREFIX/usr/sbin/dockerd" "$PREFIX/usr/sbin/runc" "$PREFIX/usr/bin/containerd"
                    "$PREFIX/usr/bin/containerd-shim-runc-v2" "$PREFIX/usr/bin/docker")
    for library in $(ldd "${binaries[@]}" 2>/dev/null | awk '/not found/ {print $1}' | sort -u); do
        local copy
        copy=$(find "$PREFIX/lib" "$PREFIX/usr/lib" -name "$library" 2>/dev/null | head -1 || true)
        [ -n "$copy" ] || fail "dockerd needs $library, which neither the machine nor the carried packages have"
        ln -sf "$copy" "$PREFIX/missing-libs/$library"
        say "the machine lacks $library: using Debian's ($copy)"
    done
    local still
    still=$(LD_LIBRARY_PATH=$PREFIX/missing-libs ldd "${binaries[@]}" | grep "not found" || true)
    [ -z "$still" ] || fail "libraries still missing: $still"
    say "installed: $(LD_LIBRARY_PATH=$PREFIX/missing-libs dockerd --version); $(LD_LIBRARY_PATH=$PREFIX/missing-libs runc --version | head -1)"
}

step_dockerd() {
    if docker info >/dev/null 2>&1; then say "dockerd already answers"; return; fi
    command -v dockerd >/dev/null || fail "no dockerd: run the install step first"
    say "starting dockerd (log: $WORK/dockerd.log)"
    LD_LIBRARY_PATH=$PREFIX/missing-libs setsid nohup dockerd --iptables=false --ip-masq=false --bridge=none \
        --userland-proxy=false --storage-driver=overlay2 --exec-opt native.cgroupdriver=cgroupfs \
        --data-root "$ROOT/docker-data" --exec-root "$ROOT/docker-exec" --pidfile "$ROOT/docker.pid" \
        --host "${DOCKER_HOST:-unix:///var/run/docker.sock}" >>"$WORK/dockerd.log" 2>&1 </dev/null &
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { tail -30 "$WORK/dockerd.log" >&2; fail "dockerd did not answer within 60 s"; }
    say "dockerd answers: $(docker info --format 'server {{.ServerVersion}}, storage {{.Driver}}, cgroup v{{.CgroupVersion}} ({{.CgroupDriver}}), runtimes {{range $name, $_ := .Runtimes}}{{$name}} {{end}}')"
}

base_image() { cat "$WORK/base-image.txt" 2>/dev/null; }

step_image() {
    engine_ready
    if [ -n "$(base_image)" ] && docker image inspect "$(base_image)" >/dev/null 2>&1; then
        say "base image $(base_image) already there"; return
    fi
    [ -x "$PYTHON" ] || fail "no Python at $PYTHON (set PYTHON)"
    local venv base parts=()
    venv=$("$PYTHON" -c 'import sys; print(sys.prefix)')
    base=$("$PYTHON" -c 'import sys; print(sys.base_prefix)')
    for part in usr etc bin sbin lib lib64 "${venv#/}" "${base#/}"; do
        if [ -e "/$part" ] && [[ " ${parts[*]} " != *" $part "* ]] && [[ $part != usr/* ]]; then parts+=("$part"); fi
    done
    say "python $("$PYTHON" --version 2>&1) (venv $venv, made from $base); archiving ${parts[*]/#//}"
    du -sh "${parts[@]/#//}" 2>/dev/null | sed 's/^/gpu_container:   /' || true
    local start=$SECONDS
    # readable by the worker's user (nobody) wherever the machine keeps its interpreter (/root is 0700); no secrets.
    # tar's exit 1 (a file changed while read, on a live machine) is a warning, not a failure
    set +e +o pipefail
    tar -C / --create --numeric-owner --mode=a+rX --exclude=usr/local/nvidia --exclude='libcuda.so*' \
        --exclude='libcudadebugger.so*' --exclude='libnvidia-*.so*' --exclude=etc/shadow --exclude=etc/gshadow \
        --exclude='etc/ssh/ssh_host_*' --exclude='*/__pycache__' "${parts[@]}" \
      | docker import --change "ENV PATH=$venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
          --change "ENV LANG=C.UTF-8" - "$BASE_REPOSITORY:imported" >/dev/null
    local statuses=("${PIPESTATUS[@]}")
    set -e -o pipefail
    [ "${statuses[0]}" -le 1 ] && [ "${statuses[1]}" = 0 ] \
        || fail "tar (exit ${statuses[0]}) | docker import (exit ${statuses[1]}) failed"
    local layer
    layer=$(docker image inspect --format '{{index .RootFS.Layers 0}}' "$BASE_REPOSITORY:imported")
    docker tag "$BASE_REPOSITORY:imported" "$BASE_REPOSITORY:${layer:7:16}"
    echo "$BASE_REPOSITORY:${layer:7:16}" >"$WORK/base-image.txt"
    say "base image $(base_image) ($(docker image inspect --format '{{.Size}}' "$(base_image)" | numfmt --to=iec)) in $((SECONDS - start)) s"
    docker run --rm --network none "$(base_image)" python3 -c "import torch, triton; print('in the base image: torch', torch.__version__, 'triton', triton.__version__)" \
        || fail "the base image cannot import torch"
}

step_build() {
    [ -n "$(base_image)" ] || fail "no base image: run the image step first"
    mlcbench_ready
    engine_ready
    mlcbench build "$ENV_NAME" --base-image "$(base_image)" --wheelhouse .whl | tee "$WORK/image.txt" \
        || fail "mlcbench build $ENV_NAME failed"
    say "env $ENV_NAME: image $(cat "$WORK/image.txt")"
}

step_check() {
    mlcbench_ready
    engine_ready
    local passed=yes
    python3 benchmarks/gpu_container_check.py "$ENV_NAME" "$WORK/check.json" 2>&1 | tee "$WORK/check.txt" || passed=no
    cp "$WORK/check.json" "$WORK/check.txt" "$OUT/" 2>/dev/null || true
    [ $passed = yes ] || fail "a container did not see exactly its own GPU, or the check failed ($WORK/check.txt)"
    say "every GPU alone in its container"
}

sweep_into() {  # ENV NAME: the suite in ENV into $WORK/NAME.db, resumable
    local env=$1 name=$2 start=$SECONDS status
    mlcbench_ready
    [ "$env" = local ] || engine_ready
    set +e
    timeout --preserve-status -s INT "${SWEEP_TIMEOUT_S:-420}" python3 -m mlcbench.orchestrator sweep --env "$env" \
        --suite "$SUITE" --db "sqlite:///$WORK/$name.db" --cache-dir "$WORK/cache-$name" --workdir "$WORK/work-$name" \
        2>&1 | grep -v "━" | tail -40
    status=${PIPESTATUS[0]}
    set -e
    echo "$(date -u +%FT%TZ) sweep --env $env: exit $status, $((SECONDS - start)) s" | tee -a "$WORK/times.txt"
    python3 -m mlcbench.orchestrator export --db "sqlite:///$WORK/$name.db" --format csv --out "$OUT/$name.csv"
    cp "$WORK/$name.db" "$WORK/times.txt" "$OUT/"
    case $status in
        0) say "--env $env: every cell stored in $WORK/$name.db" ;;
        130) fail "--env $env stopped after ${SWEEP_TIMEOUT_S:-420} s with cells left: run the same step again to resume" ;;
        3) fail "--env $env: some jobs failed (see $OUT/$name.csv)" ;;
        *) fail "--env $env: sweep exit $status" ;;
    esac
}

step_sweep() { sweep_into "$ENV_NAME" docker; }
step_local() { sweep_into local local; }

step_compare() {
    mlcbench_ready
    for name in docker local; do [ -f "$WORK/$name.db" ] || fail "no $name.db: run the sweep and local steps"; done
    rm -f "$WORK/both.db"
    python3 -m mlcbench.orchestrator merge "$WORK/docker.db" "$WORK/local.db" --into "sqlite:///$WORK/both.db" \
        || fail "merging the two stores failed"
    python3 -m mlcbench.orchestrator compare --db "sqlite:///$WORK/both.db" --env "$ENV_NAME" --env local 2>&1 \
        | tee "$WORK/compare.txt" || fail "mlcbench compare failed ($WORK/compare.txt)"
    python3 -m mlcbench.orchestrator export --db "sqlite:///$WORK/both.db" --format csv --out "$OUT/both.csv"
    { date -u; nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader; lscpu | grep "Model name"; nproc
      cat "$WORK/image.txt"; cat "$WORK/base-image.txt"; } >"$WORK/machine.txt" 2>&1
    cp "$WORK/both.db" "$WORK/compare.txt" "$WORK/machine.txt" "$OUT/"
    say "compared: $WORK/compare.txt"
}

[ $# -gt 0 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2; }
[ "$(id -u)" = 0 ] || fail "run as root (dockerd)"
steps=("$@")
[ "$*" = all ] && steps=(install dockerd image build check sweep local compare)
for step in "${steps[@]}"; do
    declare -F "step_$step" >/dev/null || fail "unknown step $step"
done
for step in "${steps[@]}"; do
    say "== $step ($(date -u +%T))"
    "step_$step"
done
say "done: ${steps[*]}"

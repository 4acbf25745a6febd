#!/usr/bin/env bash
# Issues 50 and 57 on the GPU machine (the `device` tool; root, no network, no Docker, ≤ 64 MiB carried a call): a
# Docker engine from carried Debian packages, an mlcbench image made from the machine's own Python, every GPU checked
# to be alone in its container, a suite swept in that container on one GPU and with --env local on another at once,
# both stores compared.
#
#   bash benchmarks/gpu_container.sh STEP...        (steps run in the order given; `all`: install through compare)
#
# Steps here, in the checkout on a Debian 12 machine with network (what the GPU machine's calls carry):
#   debs       .debs/a and .debs/b: Debian bookworm's packages of the engine (apt-get download), in two halves, since
#              one call carries at most 64 MiB: .debs/a (docker.io, tini, the libraries dockerd links; 38 MB) and
#              .debs/b (containerd, runc; 28 MB)
#   wheels     .whl: mlcbench's wheel of this checkout and the host side's wheels the GPU machine's Python lacks (its
#              pydantic, SQLAlchemy, Alembic, the Docker SDK and requests), the versions of this checkout's .venv
# Steps on the GPU machine (each prints what it did, is safe to run again, and stops the script with a message on the
# first failure):
#   probe      whether this machine could run an engine at all (step 1 of issue 50): privileges, namespaces,
#              cgroups, storage drivers, the GPU's device nodes and driver libraries; prints, changes nothing
#   stage      copy the .deb files carried in .debs/ (any subfolder) to /root/debs
#   ready      install the wheels carried in .whl/ and compile the machine's bytecode (benchmarks/device_env.sh, once;
#              every step that runs mlcbench does it where it is not done)
#   install    unpack the packages (dpkg -x) into /root/docker-root, link the libraries the machine lacks
#   dockerd    start dockerd (--iptables=false --bridge=none --storage-driver=overlay2, data under /root/docker-data,
#              log /root/gpu-container/dockerd.log) unless it answers
#   image      the base image mlcbench-base/gpu-host:<hash of its layer>: `docker import` of a tar of the machine's
#              Python (the venv of $PYTHON and the interpreter it is made from), /usr, /etc and the /bin, /sbin, /lib,
#              /lib64 there are; without the NVIDIA driver's libraries, so that the container's CUDA can only come
#              through the passthrough
#   build      `mlcbench build gpu-host` on it (envs/gpu-host: pydantic from .whl, bytecode compiled)
#   check      one container per GPU at once, each must see exactly its own GPU (benchmarks/gpu_container_check.py)
#   sweeps     start, in the background (their own sessions: they outlive the call while the machine is held),
#              benchmarks/suites/gpu-container.toml in the container (--env gpu-host, GPU 0) into docker.db and with
#              --env local (GPU 1; CONTAINER_GPU=1 swaps them) into local.db, at once, each held to its GPU's half of
#              the host's cores (whole physical cores; the container through its cpuset); on a one-GPU host one after
#              the other on GPU 0, all cores
#   wait       until both sweeps have ended, or until the script has run CALL_S seconds (default 520: a call runs
#              10 minutes at most, and a compare after it takes some 30 s); says how far each got. A sweep that
#              stopped resumes from its store where a `sweeps` step starts it again
#   compare    merge both stores into both.db, `mlcbench compare --env gpu-host --env local`, CSV exports (it needs no
#              GPU: the stores a call brought back compare here as well)
# The steps that need the engine start dockerd again where an earlier call's is gone. Everything lands in
# /root/gpu-container; every call brings back one file, $OUT/gpu-container.tar.gz (stores, CSVs, logs, the check, the
# compare, the machine's and the engine's facts): $OUT returns at most 8 files.
#
# Calls, as the lead runs them on nvidia-h200-x2 (the machine goes back 30 s after a call and 30 min after its start:
# make each call at once after the last, and all of them within those 30 minutes):
#   here, in a clean checkout of the revision to run:   bash benchmarks/gpu_container.sh debs wheels
#   1. carry .debs/a and .whl:   bash benchmarks/gpu_container.sh stage ready
#   2. carry .debs/b and .whl:
#        MLCBENCH_GIT_REV=<git rev-parse --short=12 HEAD, here> bash benchmarks/gpu_container.sh stage install dockerd \
#          image build check sweeps wait
#   3. carry .whl:   bash benchmarks/gpu_container.sh wait compare   (again until compare runs)
# Each call's gpu-container.tar.gz holds the stores as they stand: should the machine go back before the compare,
# `mlcbench merge docker.db local.db --into sqlite:///both.db` and `mlcbench compare --db sqlite:///both.db --env
# gpu-host --env local` run here.
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
# the GPU (0 or 1) of the container's sweep on a two-GPU host; the local one takes the other. 1 swaps them, to tell a
# GPU's difference from the container's (once the first run's stores and caches are moved out of $WORK)
CONTAINER_GPU=${CONTAINER_GPU:-0}
OUT=${OUT:-$WORK/out}
# the engine's packages in the two halves that two calls carry (.debs/a, .debs/b)
PACKAGES_A=(docker.io tini libdevmapper1.02.1 libseccomp2 libsystemd0 libcap2 libgcrypt20 liblzma5 libzstd1 liblz4-1
            libselinux1 libudev1 libgpg-error0 libpcre2-8-0)
PACKAGES_B=(containerd runc)
PACKAGES=("${PACKAGES_A[@]}" "${PACKAGES_B[@]}")
HERE_STEPS=(debs wheels)  # run in the checkout here, not on the GPU machine
# what the host side needs beyond the GPU machine's Python (its numpy, scipy, matplotlib, pyarrow, typer, rich and
# nvidia-ml-py serve), as this checkout's .venv has them
HOST_WHEELS=(pydantic pydantic-core annotated-types typing-inspection typing-extensions sqlalchemy alembic mako
             markupsafe docker requests urllib3 certifi idna charset-normalizer)
# and the workers' packages it lacks: torchax (pure Python; the machine's own jax, jaxlib and CUDA plugin serve it)
WORKER_WHEELS=(torchax)
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

step_debs() {
    rm -rf .debs
    mkdir -p .debs/a .debs/b
    (cd .debs/a && apt-get download -q "${PACKAGES_A[@]}") || fail "apt-get download ${PACKAGES_A[*]}"
    (cd .debs/b && apt-get download -q "${PACKAGES_B[@]}") || fail "apt-get download ${PACKAGES_B[*]}"
    say ".debs/a $(du -sh .debs/a | cut -f1), .debs/b $(du -sh .debs/b | cut -f1) (a call carries 64 MiB at most)"
}

step_wheels() {
    [ -x .venv/bin/python ] || fail "no .venv here: make .venv/bin/mlcbench first"
    local pins wanted=("${HOST_WHEELS[@]}" "${WORKER_WHEELS[@]}")
    pins=$(.venv/bin/python -m pip freeze | grep -i -E "^($(IFS='|'; echo "${wanted[*]}" | sed 's/-/[-_]/g'))==") \
        || fail "this .venv lacks the host side's packages"
    rm -rf .whl
    mkdir -p .whl
    .venv/bin/python -m pip wheel -q --no-deps -w .whl . || fail "building mlcbench's wheel"
    # shellcheck disable=SC2086  # one pin a word
    .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --abi cp312 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl $pins || fail "downloading the host side's wheels"
    say ".whl: $(ls .whl | wc -l) wheels, $(du -sh .whl | cut -f1)"
}

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

step_ready() { mlcbench_ready; say "the carried wheels installed, the machine's bytecode compiled"; }

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
    [ $passed = yes ] || fail "a container did not see exactly its own GPU, or the check failed ($WORK/check.txt)"
    say "every GPU alone in its container"
}

SIDES=(docker local)  # the two sweeps: their stores, caches, work folders, logs and exit files are named after them
side_env() { if [ "$1" = docker ]; then echo "$ENV_NAME"; else echo local; fi; }
running() { [ -f "$WORK/$1.pid" ] && kill -0 "$(cat "$WORK/$1.pid")" 2>/dev/null; }
own_cores() { taskset -pc $$ | sed 's/.*: //'; }

sweep_now() {  # SIDE GPU: the suite in the side's env on GPU (its NVML index) into $WORK/SIDE.db (resumes what it holds)
    local side=$1 gpu=$2 env start=$SECONDS status
    env=$(side_env "$side")
    mlcbench_ready
    [ "$env" = local ] || engine_ready
    set +e
    python3 -m mlcbench.orchestrator sweep --env "$env" --gpus "$gpu" --suite "$SUITE" --db "sqlite:///$WORK/$side.db" \
        --cache-dir "$WORK/cache-$side" --workdir "$WORK/work-$side"
    status=$?
    set -e
    echo "$(date -u +%FT%TZ) sweep --env $env on GPU $gpu, cores $(own_cores): exit $status, $((SECONDS - start)) s" \
        >>"$WORK/times.txt"
    python3 -m mlcbench.orchestrator export --db "sqlite:///$WORK/$side.db" --format csv --out "$WORK/$side.csv" || true
    echo "$status" >"$WORK/$side.exit"
}

start_sweeps() {  # CORES SIDE GPU [SIDE GPU]: one background job in its own session on CORES, its sweeps in turn
    local cores=$1 job=() sides=()
    shift
    while [ $# -gt 0 ]; do
        if running "$1"; then say "$1: already running (pid $(cat "$WORK/$1.pid"))"; return; fi
        rm -f "$WORK/$1.exit"
        job+=("bash benchmarks/gpu_container.sh _sweep $1 $2;")
        sides+=("$1")
        say "$1 (--env $(side_env "$1")): GPU $2, cores $cores, log $WORK/$1.log"
        shift 2
    done
    setsid nohup taskset -c "$cores" bash -c "${job[*]}" >>"$WORK/${sides[0]}.log" 2>&1 </dev/null &
    for side in "${sides[@]}"; do echo $! >"$WORK/$side.pid"; done
}

step_sweeps() {
    mlcbench_ready  # installs the carried wheels once, before the sweeps start
    engine_ready
    local shares
    local gpus
    gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
    if [ "$gpus" -ge 2 ]; then
        # the sweep's own split of the host's cores, one share per GPU (whole physical cores each): the two sides take
        # GPUs 0 and 1 with their shares; on a larger host the other GPUs and their shares stay free for other work
        mapfile -t shares < <(python3 -c 'import sys; from mlcbench.orchestrator.sweep.schedule import core_shares
for share in core_shares(int(sys.argv[1])): print(",".join(map(str, sorted(share))))' "$gpus")
        start_sweeps "${shares[$CONTAINER_GPU]}" docker "$CONTAINER_GPU"
        start_sweeps "${shares[$((1 - CONTAINER_GPU))]}" local $((1 - CONTAINER_GPU))
    else
        start_sweeps "$(own_cores)" docker 0 local 0
    fi
    machine_facts
}

step_wait() {
    local left=()
    while :; do
        left=()
        for side in "${SIDES[@]}"; do if running "$side"; then left+=("$side"); fi; done
        if [ ${#left[@]} -eq 0 ] || [ $SECONDS -ge "${CALL_S:-520}" ]; then break; fi
        sleep 10
    done
    for side in "${SIDES[@]}"; do
        echo "-- $side: $(if running "$side"; then echo running; elif [ -f "$WORK/$side.exit" ]; then
            echo "ended, exit $(cat "$WORK/$side.exit")"; else echo "not ended"; fi)"
    done
    for log in "$WORK"/*.log; do [ "$log" = "$WORK/dockerd.log" ] || grep -v "━" "$log" | tail -8; done
    machine_facts
    [ ${#left[@]} -eq 0 ] || { say "still running: ${left[*]}; call the wait step again"; return; }
    for side in "${SIDES[@]}"; do
        case $(cat "$WORK/$side.exit" 2>/dev/null) in
            0) say "$side: every cell stored in $WORK/$side.db" ;;
            3) say "$side: every cell stored, some of them failed (see $side.csv)" ;;
            *) fail "$side: its sweep did not end (see its log); the sweeps step resumes it from its store" ;;
        esac
    done
}

machine_facts() {  # the GPUs, the host's CPU, the engine and the images, beside the stores
    { date -u
      nvidia-smi --query-gpu=index,name,uuid,driver_version,pci.bus_id,clocks.max.sm,power.limit --format=csv
      lscpu | grep -E "Model name|^CPU\(s\)|Thread|NUMA node"
      docker version --format 'engine {{.Server.Version}}, API {{.Server.APIVersion}}'
      docker info --format 'storage {{.Driver}}, cgroup v{{.CgroupVersion}} ({{.CgroupDriver}}), runtimes {{range $name, $_ := .Runtimes}}{{$name}} {{end}}'
      echo "image $(cat "$WORK/image.txt" 2>/dev/null)"; echo "base image $(base_image)"; cat "$WORK/times.txt"
    } >"$WORK/machine.txt" 2>&1 || true  # a fact that cannot be read is said so in the file
}

step_compare() {
    mlcbench_ready
    for side in "${SIDES[@]}"; do
        [ -f "$WORK/$side.db" ] || fail "no $side.db: run the sweeps step"
        if running "$side"; then fail "$side is still running: the wait step first"; fi
    done
    rm -f "$WORK/both.db"
    python3 -m mlcbench.orchestrator merge "$WORK/docker.db" "$WORK/local.db" --into "sqlite:///$WORK/both.db" \
        || fail "merging the two stores failed"
    python3 -m mlcbench.orchestrator compare --db "sqlite:///$WORK/both.db" --env "$ENV_NAME" --env local 2>&1 \
        | tee "$WORK/compare.txt" || fail "mlcbench compare failed ($WORK/compare.txt)"
    python3 -m mlcbench.orchestrator export --db "sqlite:///$WORK/both.db" --format csv --out "$WORK/both.csv"
    say "compared: $WORK/compare.txt"
}

bundle() {  # what every call brings back, as one file ($OUT returns at most 8)
    local files
    files=$(cd "$WORK" && ls -- *.db *.csv *.txt *.log *.json 2>/dev/null) || true
    [ -z "$files" ] || (cd "$WORK" && tar -czf "$OUT/gpu-container.tar.gz" $files) || true
}

[ $# -gt 0 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2; }
[ "$1" = _sweep ] && { shift; sweep_now "$@"; exit; }  # a background job of the sweeps step
steps=("$@")
[ "$*" = all ] && steps=(install dockerd image build check sweeps wait compare)
here=yes
for step in "${steps[@]}"; do
    declare -F "step_$step" >/dev/null || fail "unknown step $step"
    [[ " ${HERE_STEPS[*]} " == *" $step "* ]] || here=no
done
if [ $here = no ]; then
    [ "$(id -u)" = 0 ] || fail "run as root (dockerd)"
    mkdir -p "$WORK" "$OUT"
    trap bundle EXIT
fi
for step in "${steps[@]}"; do
    say "== $step ($(date -u +%T))"
    "step_$step"
done
say "done: ${steps[*]}"

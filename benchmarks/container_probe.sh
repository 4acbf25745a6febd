#!/usr/bin/env bash
# Whether this machine could run a container engine (issue 50, step 1): privileges, namespaces, cgroups, storage
# drivers, the GPU's device nodes and driver libraries. Prints what it finds; changes nothing.
echo "== user and capabilities"; id; grep -E "^Cap(Eff|Bnd)" /proc/self/status
echo "== kernel"; uname -a
echo "== namespaces (unshare)"; for ns in --mount --pid --net --user --ipc --uts; do
    if unshare $ns --fork true 2>/dev/null; then echo "unshare $ns: ok"; else echo "unshare $ns: refused"; fi; done
echo "== cgroups"; mount | grep -E "cgroup" || echo "no cgroup mount"; cat /proc/self/cgroup
ls /sys/fs/cgroup 2>&1 | head -20; cat /sys/fs/cgroup/cgroup.controllers 2>&1
echo "== storage drivers"; grep -E "overlay|fuse|btrfs|xfs|ext4" /proc/filesystems; df -hT / | tail -1
if mkdir -p /tmp/ovl/{l,u,w,m} && mount -t overlay overlay -o lowerdir=/tmp/ovl/l,upperdir=/tmp/ovl/u,workdir=/tmp/ovl/w /tmp/ovl/m 2>&1; then
    echo "overlay mount: ok"; umount /tmp/ovl/m; else echo "overlay mount: refused"; fi
echo "== GPU device nodes"; ls -l /dev/nvidia* 2>&1
echo "== driver libraries"; ldconfig -p | grep -E "libcuda\.so|libnvidia-ml\.so" | head; ls /usr/local/nvidia 2>&1 | head
echo "== engines present"; for tool in dockerd containerd runc crun podman; do command -v $tool || echo "$tool: not installed"; done
echo "== iptables / bridge"; command -v iptables || echo "iptables: not installed"; ip link 2>&1 | head -5

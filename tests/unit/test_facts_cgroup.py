"""cgroup CPU/memory limits, CPU and memory facts, read from real files in a fake root."""

import os

from provision.agent.facts import cgroup, cpu, memory


def write(root, relative, text):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def v2_root(
    tmp_path, cpu_max="400000 100000", parent_cpu_max="max 100000", memory_max="17179869184"
):
    """A container on cgroup v2 without a cgroup namespace: /proc/self/cgroup names the full path."""
    # mountinfo paths are as the process sees them; the readers resolve them under `root`
    write(tmp_path, "proc/self/cgroup", "0::/kubepods/burstable/pod42/abc\n")
    write(
        tmp_path,
        "proc/self/mountinfo",
        "1052 1049 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n",
    )
    ours = "sys/fs/cgroup/kubepods/burstable/pod42/abc/"
    write(tmp_path, ours + "cpu.max", cpu_max + "\n")
    write(tmp_path, "sys/fs/cgroup/kubepods/burstable/pod42/cpu.max", parent_cpu_max + "\n")
    write(tmp_path, ours + "memory.max", memory_max + "\n")
    write(tmp_path, ours + "memory.current", str(6 << 30) + "\n")
    write(
        tmp_path,
        ours + "memory.stat",
        f"anon 3221225472\nfile 3221225472\ninactive_file {2 << 30}\nactive_file 0\n",
    )
    write(tmp_path, "sys/fs/cgroup/kubepods/memory.max", "max\n")
    return tmp_path


def test_v2_quota_and_limit_with_parent_limits(tmp_path):
    root = v2_root(tmp_path, cpu_max="400000 100000", parent_cpu_max="250000 100000")
    quota = cgroup.cpu_quota(str(root))
    assert quota["cpus"] == 2.5 and quota["version"] == "v2"  # the parent's limit is smaller
    assert quota["path"].endswith("pod42")
    limit = cgroup.memory_limit(str(root))
    assert limit["limit_bytes"] == 16 << 30
    assert limit["usage_bytes"] == 4 << 30  # 6 GiB used minus 2 GiB inactive file cache


def test_v2_unlimited(tmp_path):
    root = v2_root(tmp_path, cpu_max="max 100000", memory_max="max")
    assert cgroup.cpu_quota(str(root))["cpus"] is None
    assert cgroup.memory_limit(str(root))["limit_bytes"] is None


def test_v1_without_cgroup_namespace(tmp_path):
    # The layout of this sandbox's own host: v1 hierarchies at /sys/fs/cgroup/<controller>.
    cg = tmp_path / "sys/fs/cgroup"
    write(
        tmp_path,
        "proc/self/cgroup",
        "4:memory:/process_api/dfae9e80\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/docker/0123abcd\n0::/\n",
    )
    write(
        tmp_path,
        "proc/self/mountinfo",
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
    )
    write(tmp_path, "sys/fs/cgroup/cpu/docker/0123abcd/cpu.cfs_quota_us", "600000\n")
    write(tmp_path, "sys/fs/cgroup/cpu/docker/0123abcd/cpu.cfs_period_us", "100000\n")
    write(tmp_path, "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n")
    write(tmp_path, "sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n")
    write(
        tmp_path,
        "sys/fs/cgroup/memory/process_api/dfae9e80/memory.limit_in_bytes",
        "9223372036854771712\n",
    )
    write(
        tmp_path, "sys/fs/cgroup/memory/process_api/dfae9e80/memory.usage_in_bytes", "1334546432\n"
    )
    write(tmp_path, "sys/fs/cgroup/memory/process_api/memory.limit_in_bytes", "34359738368\n")
    quota = cgroup.cpu_quota(str(tmp_path))
    assert quota == {"cpus": 6.0, "version": "v1", "path": str(cg / "cpu/docker/0123abcd")}
    limit = cgroup.memory_limit(str(tmp_path))
    assert limit["limit_bytes"] == 32 << 30 and limit["usage_bytes"] == 1334546432
    assert limit["version"] == "v1"


def test_cpu_facts_take_the_smaller_of_affinity_and_quota(tmp_path):
    root = v2_root(tmp_path, cpu_max="150000 100000")
    write(
        tmp_path,
        "proc/cpuinfo",
        "".join(
            f"processor\t: {n}\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8358 CPU @ 2.60GHz\n"
            f"physical id\t: {n // 4}\ncore id\t\t: {n % 4}\nflags\t\t: fpu vme sse2 hypervisor avx512f\n\n"
            for n in range(8)
        ),
    )
    facts = cpu.gather(str(root))
    assert facts["model"] == "Intel(R) Xeon(R) Platinum 8358 CPU @ 2.60GHz"
    assert (facts["sockets"], facts["physical_cores"]) == (2, 8)
    assert facts["cgroup_quota_cpus"] == 1.5
    assert facts["effective_cpus"] == min(1.5, len(os.sched_getaffinity(0)))
    assert facts["usable_cpus"] == 1
    assert facts["hypervisor_flag"] is True


def test_arm_cpuinfo():
    info = cpu.parse_cpuinfo(
        "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n\n"
    )
    assert info["vendor"] == "arm:0x41" and info["model"] is None and info["physical_cores"] is None


def test_memory_facts_cap_host_memory_by_the_cgroup(tmp_path):
    root = v2_root(tmp_path)
    write(
        tmp_path,
        "proc/meminfo",
        "MemTotal:       1056454396 kB\nMemFree:        8000000 kB\nMemAvailable:   900000000 kB\nSwapTotal:             0 kB\n",
    )
    facts = memory.gather(str(root))
    assert facts["total_bytes"] == 1056454396 * 1024
    assert facts["effective_total_bytes"] == 16 << 30
    assert facts["effective_available_bytes"] == (16 << 30) - (4 << 30)
    assert facts["shm"] is None  # no dev/shm in the fake root


def test_memory_facts_report_the_open_files_limit(tmp_path):
    """`ulimit -n` as a job started from this login inherits it (set here, not this machine's)."""
    import json
    import resource
    import subprocess
    import sys

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    soft = 321 if hard == resource.RLIM_INFINITY or hard >= 321 else hard

    def lower():
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    code = "import json; from provision.agent.facts import memory; print(json.dumps(memory.gather()['open_files']))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         preexec_fn=lower).stdout
    expected_hard = None if hard == resource.RLIM_INFINITY else hard
    assert json.loads(out) == {"soft": soft, "hard": expected_hard}

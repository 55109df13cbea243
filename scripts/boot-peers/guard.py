"""Memory guard: run a benchmark command, kill it if it grows too large, and make sure one JSON
line comes out.

  python3 guard.py --lib NAME --variant V --threads T [--limit-gb 20] [--min-avail-gb 1.0]
                   [--timeout S] [--log FILE] -- CMD ...

The command's stderr (progress) goes to --log (or our stderr); its stdout is scanned for the last
line that parses as a JSON object, which is printed.  The command is killed (SIGKILL, its whole
process group) when its resident set (the sum over its process tree) passes --limit-gb, or when
the machine's MemAvailable falls under --min-avail-gb (the machine is shared: the guard must stop
before the kernel starts reclaiming or the OOM killer picks someone else).  Then, or when the
command dies without printing JSON (e.g. the kernel OOM-killed it), a JSON object with null
measurements and status "killed for memory" / "error: ..." is printed instead.
Runs on any Python 3 (no third-party modules).
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

NULL_FIELDS = [
    "version", "n", "slots", "boot_s_min", "boot_s_median", "boot_s_all", "setup_s", "keygen_s",
    "levels_before", "levels_left", "max_level", "prec_min_bits", "prec_avg_bits",
    "prec_median_bits", "prec_imag_min_bits", "rotation_keys", "key_bytes", "params",
]


def tree_rss_kb(root):
    """Sum of VmRSS over root and its descendants (via /proc/*/stat ppid)."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
            ppid = int(s[s.rfind(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(d))
        except (OSError, ValueError, IndexError):
            pass
    total, stack = 0, [root]
    while stack:
        p = stack.pop()
        stack.extend(children.get(p, []))
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
    return total


def mem_available_kb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return None


def partial_times(path, start):
    """Seconds of the timed reps ("  rep i/n: X s" progress lines) logged before a kill."""
    if not path:
        return []
    try:
        with open(path) as f:
            f.seek(start)
            text = f.read()
    except OSError:
        return []
    return [float(m) for m in re.findall(r"^  rep \d+/\d+: ([0-9.]+) s$", text, re.M)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--variant", default="")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--limit-gb", type=float, default=20.0)
    ap.add_argument("--min-avail-gb", type=float, default=1.0)
    ap.add_argument("--timeout", type=float, default=0, help="seconds; 0 = none")
    ap.add_argument("--log", default="")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd

    log_start = os.path.getsize(a.log) if a.log and os.path.exists(a.log) else 0
    logf = open(a.log, "a") if a.log else sys.stderr
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=logf, text=True,
                            start_new_session=True)
    out_lines = []
    reader = threading.Thread(target=lambda: out_lines.extend(proc.stdout), daemon=True)
    reader.start()

    killed = None
    peak_kb = 0
    t0 = time.time()
    while proc.poll() is None:
        rss = tree_rss_kb(proc.pid)
        peak_kb = max(peak_kb, rss)
        avail = mem_available_kb()
        if rss > a.limit_gb * 2**20:
            killed = f"killed for memory (RSS {rss / 2**20:.1f} GB > {a.limit_gb:g} GB limit)"
        elif avail is not None and avail < a.min_avail_gb * 2**20:
            killed = (f"killed for memory (machine MemAvailable {avail / 2**20:.2f} GB < "
                      f"{a.min_avail_gb:g} GB at RSS {rss / 2**20:.1f} GB)")
        elif a.timeout and time.time() - t0 > a.timeout:
            killed = f"error: timeout after {a.timeout:g} s"
        if killed:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            break
        time.sleep(0.2)
    rc = proc.wait()
    reader.join(timeout=5)
    elapsed = time.time() - t0

    rec = None
    for line in reversed(out_lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                rec = json.loads(line)
                break
            except ValueError:
                pass
    if rec is None or killed:
        if killed is None:
            # Died without a result line: SIGKILL with no guard action is almost always the
            # kernel's OOM killer; anything else is reported with its exit status.
            killed = ("killed for memory (SIGKILL, likely the kernel OOM killer)"
                      if rc == -signal.SIGKILL else f"error: exit status {rc} without a result")
        rec = {"lib": a.lib, "variant": a.variant, "threads": a.threads,
               "omp_num_threads": os.environ.get("OMP_NUM_THREADS")}
        for k in NULL_FIELDS:
            rec[k] = None
        rec["peak_rss_mb"] = round(peak_kb / 1024, 1)
        rec["status"] = killed if killed.startswith("error") else "killed for memory"
        rec["status_detail"] = killed
        partial = partial_times(a.log, log_start)
        if partial:
            rec["partial_boot_s"] = partial  # timed reps finished before the kill (from the log)
    rec["guard_peak_rss_mb"] = round(peak_kb / 1024, 1)
    rec["wall_s"] = round(elapsed, 2)
    if logf is not sys.stderr:
        logf.write(f"### guard: rc={rc} wall={elapsed:.1f}s peak_rss={peak_kb / 1024:.0f}MB "
                   f"status={rec.get('status')}\n")
        logf.close()
    print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()

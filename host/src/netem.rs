//! An emulated network link for benchmarks: two network namespaces joined by a veth pair with
//! `tc netem` (one-way delay + rate) on both ends, created and torn down by the benchmark itself.
//!
//! Linux only, needs root, `ip`/`tc` (iproute2) and, for the delay, the `sch_netem` qdisc.
//! Kernels without `sch_netem` (e.g. some micro-VMs) get a rate-only link with `tbf` instead;
//! [`NetemLink::shaping`] says which one is in place. Each link's names contain the process id,
//! so concurrent runs do not collide; the addresses (`10.77.0.1/30`, `10.77.0.2/30`) exist only
//! inside the two namespaces, so no other traffic crosses the link.
//!
//! Teardown: [`NetemLink`]'s `Drop` deletes both namespaces (which removes the veth pair and its
//! qdiscs). A detached janitor process (`setsid`) waits for the benchmark process to exit, stops
//! what still runs inside the namespaces and deletes them too, so a Ctrl-C or a kill leaves
//! nothing behind either.

use std::process::{Command, Stdio};
use std::time::Duration;

/// How the link is shaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Shaping {
    /// `netem delay <one-way> rate <bandwidth>` on both ends.
    NetemDelayRate,
    /// `tbf rate <bandwidth>` on both ends: the kernel has no `sch_netem`, so the delay is not
    /// emulated (only the bandwidth term of the model is comparable).
    TbfRateOnly,
}

/// A live emulated link. Dropping it tears it down.
#[derive(Debug)]
pub struct NetemLink {
    ns: [String; 2],
    addrs: [String; 2],
    shaping: Shaping,
}

fn run(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("`{}`: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// Why an emulated link cannot be built here, or `None` if the prerequisites are met (root,
/// `ip`, `tc`, network namespaces). Missing `sch_netem` is not a reason: see [`Shaping`].
pub fn unavailable_reason() -> Option<String> {
    if !cfg!(target_os = "linux") {
        return Some("network namespaces need Linux".into());
    }
    if !is_root() {
        return Some("creating network namespaces and qdiscs needs root (effective uid 0)".into());
    }
    for tool in ["ip", "tc"] {
        if run(&[tool, "-V"]).is_err() {
            return Some(format!(
                "`{tool}` not found (install iproute2, e.g. `apt-get install iproute2`)"
            ));
        }
    }
    None
}

impl NetemLink {
    /// Builds the link: namespaces `veil<pid>n0`/`veil<pid>n1`, veth `vl<pid>a`/`vl<pid>b`,
    /// addresses `10.77.0.1/30` and `10.77.0.2/30`, and on both ends `netem delay <one_way>
    /// rate <bits_per_s>` (or `tbf rate <bits_per_s>` when the kernel lacks `sch_netem`).
    pub fn new(one_way: Duration, bits_per_s: f64) -> Result<Self, String> {
        if let Some(why) = unavailable_reason() {
            return Err(why);
        }
        let pid = std::process::id();
        let ns = [format!("veil{pid}n0"), format!("veil{pid}n1")];
        let dev = [format!("vl{pid}a"), format!("vl{pid}b")];
        let addrs = ["10.77.0.1".to_string(), "10.77.0.2".to_string()];
        run(&["ip", "netns", "add", &ns[0]])?;
        let mut link = NetemLink {
            ns: [ns[0].clone(), String::new()],
            addrs: addrs.clone(),
            shaping: Shaping::NetemDelayRate,
        };
        run(&["ip", "netns", "add", &ns[1]])?;
        link.ns[1] = ns[1].clone();
        spawn_janitor(pid, &ns);
        run(&[
            "ip", "link", "add", &dev[0], "type", "veth", "peer", "name", &dev[1],
        ])?;
        for i in 0..2 {
            // Moving the end into its namespace: deleting the namespace later removes it.
            if let Err(e) = run(&["ip", "link", "set", &dev[i], "netns", &ns[i]]) {
                let _ = run(&["ip", "link", "del", &dev[0]]);
                return Err(e);
            }
        }
        let rate = format!("{}bit", bits_per_s.round() as u64);
        let delay = format!("{}us", one_way.as_micros());
        for i in 0..2 {
            let cidr = format!("{}/30", addrs[i]);
            run(&["ip", "-n", &ns[i], "addr", "add", &cidr, "dev", &dev[i]])?;
            run(&["ip", "-n", &ns[i], "link", "set", "lo", "up"])?;
            run(&["ip", "-n", &ns[i], "link", "set", &dev[i], "up"])?;
            // A queue long enough that the rate limiter delays packets instead of dropping them.
            let netem = run(&[
                "ip", "netns", "exec", &ns[i], "tc", "qdisc", "add", "dev", &dev[i], "root",
                "netem", "delay", &delay, "rate", &rate, "limit", "100000",
            ]);
            match netem {
                Ok(_) => {}
                Err(e) if e.contains("unknown") => {
                    link.shaping = Shaping::TbfRateOnly;
                    // Bucket of 10 ms at the rate (≥ 64 KB so GSO segments pass), 1 s queue.
                    let burst = format!("{}", ((bits_per_s / 8.0 / 100.0) as u64).max(1 << 16));
                    run(&[
                        "ip", "netns", "exec", &ns[i], "tc", "qdisc", "add", "dev", &dev[i],
                        "root", "tbf", "rate", &rate, "burst", &burst, "latency", "1s",
                    ])?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(link)
    }

    /// The namespace of party `i` (`0` or `1`).
    pub fn namespace(&self, i: usize) -> &str {
        &self.ns[i]
    }

    /// The address of party `i` on the link.
    pub fn addr(&self, i: usize) -> &str {
        &self.addrs[i]
    }

    /// The shaping in place.
    pub fn shaping(&self) -> Shaping {
        self.shaping
    }

    /// The qdisc of party `i`'s end, as `tc qdisc show` prints it.
    pub fn qdisc(&self, i: usize) -> String {
        run(&["ip", "netns", "exec", &self.ns[i], "tc", "qdisc", "show"])
            .unwrap_or_default()
            .lines()
            .find(|l| l.contains("netem") || l.contains("tbf"))
            .unwrap_or("")
            .trim()
            .to_string()
    }
}

impl Drop for NetemLink {
    fn drop(&mut self) {
        for ns in &self.ns {
            if !ns.is_empty() {
                let _ = run(&["ip", "netns", "del", ns]);
            }
        }
    }
}

/// A detached `sh` (new session, so Ctrl-C does not reach it) that, once process `pid` is gone
/// (whatever way it ended), stops the processes still inside the two namespaces (the party
/// processes this benchmark started there) and deletes the namespaces.
fn spawn_janitor(pid: u32, ns: &[String; 2]) {
    let (a, b) = (&ns[0], &ns[1]);
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
         for p in $(ip netns pids {a} 2>/dev/null) $(ip netns pids {b} 2>/dev/null); do \
         kill $p 2>/dev/null; done; ip netns del {a} 2>/dev/null; ip netns del {b} 2>/dev/null"
    );
    let _ = Command::new("setsid")
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

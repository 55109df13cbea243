//! The two-process run of `veil-bench convert`: complex+trim C2M then M2C between a client
//! process (P0, the key holder) and a server process (P1), over TCP — on an emulated link with
//! `--netem`, or on any address the two are given (`--party 0|1 --addr ip:port`).
//!
//! Each process builds its own CKKS context from the same options; nothing secret is shared
//! between them. The exchange, all through [`veil_host::party`]:
//! 1. P0 generates its secret and public keys and sends the parameter set, the public key and
//!    the relinearization and conjugation keys (seed-compressed); P1 checks the parameter set is
//!    its own and decodes them;
//! 2. P0 encrypts the benchmark's two vectors and sends the two ciphertexts;
//! 3. both run the OT setup, then C2M (P1 complexifies and masks with P0's public key; P0
//!    decrypts) and M2C, each timed from the end of the setup;
//! 4. P1 sends the M2C output ciphertext back; P0 decrypts it and reports the round-trip error.

use super::measure::{party, Measured, CONVERT_TRANSPORT};
use super::{chan_bytes, inputs, params_of, plans, BenchConvertOptions, NetemReport, PartyReport};
use crate::error::{core, protocol};
use crate::netem::{NetemLink, Shaping};
use crate::BenchError;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use veil_core::bert::cost::{Network, NETWORKS};
use veil_core::ckks::Ckks;
use veil_core::convert::{c2m_p0, c2m_p1, complexify, m2c_p0, m2c_p1};
use veil_core::mpc::{MpcConfig, PartyId};
use veil_host::harness::{self, PartyProcesses};
use veil_host::party::{CiphertextLink, Client, KeyRequest, Server};

/// Runs the two party processes over an emulated link with `profile`. `Ok(Err(why))`: the link
/// cannot be built here (not root, no iproute2, ...), which is reported, not a failure.
pub(super) fn run_netem(
    opts: &BenchConvertOptions,
    profile: &str,
    mem: &Measured,
) -> Result<Result<NetemReport, String>, BenchError> {
    let &Network {
        name,
        bandwidth_bps: bw,
        one_way_s: lat,
    } = NETWORKS
        .iter()
        .find(|n| n.name.eq_ignore_ascii_case(profile))
        .ok_or_else(|| BenchError::InvalidOption {
            option: "--netem",
            value: profile.into(),
            expected: "lan, wan1, wan2 or wan3",
        })?;
    if let Some(why) = crate::netem::unavailable_reason() {
        return Ok(Err(why));
    }
    let link = match NetemLink::new(Duration::from_secs_f64(lat), bw) {
        Ok(l) => l,
        Err(why) => return Ok(Err(why.to_string())),
    };
    let exe = std::env::current_exe().map_err(crate::error::io("locating this executable"))?;
    let exe = exe.to_string_lossy().into_owned();
    let addr = format!("{}:{}", link.addr(0), 47_000 + std::process::id() % 1000);
    let (log_n, depth, log_b) = (
        opts.log_n.to_string(),
        opts.depth.to_string(),
        opts.log_bmax.to_string(),
    );
    let mut procs = PartyProcesses::new();
    // Without sch_netem, a delay line in P1's namespace adds the one-way delay each way; P1
    // connects to it on its loopback and it forwards over the (rate-limited) veth.
    let mut shaping = link.shaping();
    let mut p1_addr = addr.clone();
    if shaping == Shaping::TbfRateOnly && lat > 0.0 {
        let relay = format!("127.0.0.1:{}", 48_000 + std::process::id() % 1000);
        procs.spawn_helper(
            Command::new("ip")
                .args(["netns", "exec", link.namespace(1), &exe, "convert"])
                .args(["--relay", &relay, "--addr", &addr])
                .args([
                    "--relay-delay-us",
                    &((lat * 1e6).round() as u64).to_string(),
                ]),
        )?;
        shaping = Shaping::TbfRateUserDelay;
        p1_addr = relay;
    }
    for i in 0..2 {
        let a = if i == 1 { &p1_addr } else { &addr };
        procs.spawn_party(
            Command::new("ip")
                .args(["netns", "exec", link.namespace(i), &exe, "convert"])
                .args(["--log-n", &log_n, "--depth", &depth, "--log-bmax", &log_b])
                .args(["--threads", &opts.threads.to_string()])
                .args(["--addr", a, "--party", &i.to_string()]),
        )?;
    }
    // Both parties finish within the transport timeout of every receive; add slack for setup.
    let lines = procs.wait(Duration::from_secs(1800))?;
    let report = |i: usize| -> Result<PartyReport, BenchError> {
        let line = lines.get(i).map(String::as_str).unwrap_or("");
        serde_json::from_str(line).map_err(|source| BenchError::Report {
            from: format!("party {i}"),
            line: line.chars().take(200).collect(),
            source,
        })
    };
    let (p0, p1) = (report(0)?, report(1)?);
    let model = |compute: f64, bytes: u64, rounds: u32, lat: f64| {
        compute + rounds as f64 * lat + 8.0 * bytes as f64 / bw
    };
    let (cb, mb) = (chan_bytes(&mem.c2m), chan_bytes(&mem.m2c));
    let (cr, mr) = (mem.c2m.rounds, mem.m2c.rounds);
    Ok(Ok(NetemReport {
        network: name.into(),
        bandwidth_bps: bw,
        one_way_s: lat,
        shaping,
        qdisc: link.qdisc(0),
        c2m_measured_s: p1.c2m_s,
        m2c_measured_s: p1.m2c_s,
        c2m_compute_s: mem.c2m_s,
        m2c_compute_s: mem.m2c_s,
        c2m_model_s: model(mem.c2m_s, cb, cr, lat),
        m2c_model_s: model(mem.m2c_s, mb, mr, lat),
        c2m_model_rate_only_s: model(mem.c2m_s, cb, cr, 0.0),
        m2c_model_rate_only_s: model(mem.m2c_s, mb, mr, 0.0),
        c2m_bytes: p1.c2m_bytes,
        m2c_bytes: p1.m2c_bytes,
        c2m_rounds: p1.c2m_rounds,
        m2c_rounds: p1.m2c_rounds,
        max_err_ulp: p0.max_err_ulp,
        key_bytes: p0.key_bytes,
    }))
}

/// The delay line of a netem run on a kernel without `sch_netem` (`--relay ip:port --addr
/// upstream --relay-delay-us d`, hidden flags): see [`crate::netem::run_delay_relay`].
pub fn run_relay(opts: &BenchConvertOptions) -> Result<(), BenchError> {
    let missing = |option| BenchError::InvalidOption {
        option,
        value: String::new(),
        expected: "ip:port",
    };
    let listen = opts.relay.as_deref().ok_or(missing("--relay"))?;
    let upstream = opts.addr.as_deref().ok_or(missing("--addr"))?;
    crate::netem::run_delay_relay(
        listen,
        upstream,
        Duration::from_micros(opts.relay_delay_us),
        Duration::from_secs(600),
    )
    .map_err(BenchError::Netem)
}

/// One party process (`--party 0|1 --addr ip:port`): P0 (the client) listens on `addr`, P1 (the
/// server) connects to it; then the exchange of the module documentation.
pub fn run_party(opts: &BenchConvertOptions) -> Result<PartyReport, BenchError> {
    let id = match opts.party {
        Some(0) => PartyId::P0,
        Some(1) => PartyId::P1,
        other => {
            return Err(BenchError::InvalidOption {
                option: "--party",
                value: format!("{other:?}"),
                expected: "0 or 1",
            })
        }
    };
    let addr = opts.addr.as_deref().ok_or(BenchError::InvalidOption {
        option: "--addr",
        value: String::new(),
        expected: "ip:port (with --party)",
    })?;
    let p = params_of(opts)?;
    let ck = Ckks::new(Arc::new(crate::cpu_backend(&p, opts.threads)?));
    let n = p.max_slots();
    let (c2m, m2c) = plans(&p, opts.log_bmax)?;
    let (xs, ys) = inputs(n, opts.log_bmax);
    let mut t = harness::connect_process(id, addr, CONVERT_TRANSPORT)?;
    let t = &mut t;
    let mut mpc = party(id)?;
    let mut rng = veil_host::os_rng();
    let f = (1u64 << MpcConfig::ENCFORMER.ring.frac) as f64;
    let (c2m_st, m2c_st, c2m_s, m2c_s, err, key_bytes) = if id == PartyId::P0 {
        let client = Client::new(&ck, &mut rng)?;
        let req = KeyRequest {
            rotations: Vec::new(),
            conjugation: true,
        };
        let ks = client.send_keys(t, &req, &mut rng)?;
        let cx = client.encrypt_real(&xs, n, c2m.scale(), &mut rng)?;
        let cy = client.encrypt_real(&ys, n, c2m.scale(), &mut rng)?;
        client.send_ciphertexts(t, &[cx, cy])?;
        let sk = client.secret_key();
        drive_setup(&mut mpc, t)?;
        let t0 = Instant::now();
        let (sh, a) = veil_host::mpc::drive(mpc.channel(), c2m_p0(&mut mpc, &ck, sk, &c2m, 1), t)
            .map_err(protocol("C2M"))?;
        let c2m_s = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let b = veil_host::mpc::drive(mpc.channel(), m2c_p0(&mut mpc, &ck, sk, &m2c, &sh), t)
            .map_err(protocol("M2C"))?;
        let m2c_s = t1.elapsed().as_secs_f64();
        let out = client.recv_ciphertexts(t)?;
        let d = match out.first() {
            Some(c) => client.decrypt(c)?,
            None => {
                return Err(BenchError::Mismatch {
                    what: "M2C output ciphertexts",
                    expected: 1,
                    found: 0,
                })
            }
        };
        let worst = (0..n).fold(0f64, |w, k| {
            w.max((d[k].re - xs[k]).abs() * f)
                .max((d[k].im - ys[k]).abs() * f)
        });
        let kb = ks.public_key_bytes + ks.evaluation_key_bytes;
        (a, b, c2m_s, m2c_s, worst, kb)
    } else {
        // The conjugation key only.
        let (server, ks) = Server::receive_keys(&ck, t, 1)?;
        let inputs = server.recv_ciphertexts(t)?;
        let [cx, cy] = inputs.as_slice() else {
            return Err(BenchError::Mismatch {
                what: "input ciphertexts from the client",
                expected: 2,
                found: inputs.len() as u64,
            });
        };
        let z = complexify(&ck, cx, cy).map_err(core("complexify"))?;
        let pk = server.public_key();
        drive_setup(&mut mpc, t)?;
        let t0 = Instant::now();
        let cts = std::slice::from_ref(&z);
        let (sh, a) = veil_host::mpc::drive(mpc.channel(), c2m_p1(&mut mpc, &ck, pk, &c2m, cts), t)
            .map_err(protocol("C2M"))?;
        let c2m_s = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let (out, b) = veil_host::mpc::drive(mpc.channel(), m2c_p1(&mut mpc, &ck, &m2c, &sh), t)
            .map_err(protocol("M2C"))?;
        let m2c_s = t1.elapsed().as_secs_f64();
        server.send_ciphertexts(t, &out)?;
        let kb = ks.public_key_bytes + ks.evaluation_key_bytes;
        (a, b, c2m_s, m2c_s, 0.0, kb)
    };
    Ok(PartyReport {
        party: opts.party.unwrap_or(0),
        c2m_s,
        m2c_s,
        c2m_bytes: chan_bytes(&c2m_st),
        m2c_bytes: chan_bytes(&m2c_st),
        c2m_rounds: c2m_st.rounds,
        m2c_rounds: m2c_st.rounds,
        max_err_ulp: err,
        key_bytes,
    })
}

fn drive_setup(
    p: &mut veil_core::mpc::Party<veil_host::SecretRng>,
    t: &mut dyn veil_host::transport::Transport,
) -> Result<(), BenchError> {
    veil_host::mpc::drive(p.channel(), p.setup(), t).map_err(protocol("setup"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both party roles over TCP loopback, as two threads (the processes' code path): the client's
    /// keys reach the server, the round trip decodes within the error bound.
    #[test]
    fn the_two_roles_exchange_keys_and_convert_over_tcp() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let opts = |party: u8| BenchConvertOptions {
            party: Some(party),
            addr: Some(format!("127.0.0.1:{port}")),
            threads: 1,
            ..BenchConvertOptions::new(10, 3, 8)
        };
        let (o0, o1) = (opts(0), opts(1));
        let (r0, r1) = std::thread::scope(|s| {
            let h = s.spawn(|| run_party(&o1));
            (run_party(&o0), h.join().unwrap())
        });
        let (r0, r1) = (r0.unwrap(), r1.unwrap());
        assert_eq!((r0.party, r1.party), (0, 1));
        assert!(r0.max_err_ulp < 1.5, "{}", r0.max_err_ulp);
        assert!(r0.key_bytes > 0 && r0.key_bytes == r1.key_bytes);
        assert_eq!(r0.c2m_rounds, r1.c2m_rounds);
    }
}

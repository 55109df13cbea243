//! `veil bench cnn`: FEnc2's block-size study. `--table-ix` compiles the five convolution
//! settings of Table IX at every power-of-two block size (the same plan a real run follows,
//! checked by a dry run through the executor) and sets the rotation counts beside the paper's,
//! Eqs. 3–4 and the planner's `S*` (Eq. 8).

use crate::BenchError;
use serde::Serialize;
use veil_core::circuits::{Exec, SymExec};
use veil_core::cnn::{choose_block, plan, Conv2d};
use veil_core::packing::fragment::FragmentLayout;

/// Options of `veil bench cnn`.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchCnnArgs {
    /// The Table IX block-size sweep (rotation counts; no ciphertext is touched).
    #[arg(long)]
    pub table_ix: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One block size of one Table IX setting.
#[derive(Clone, Debug, Serialize)]
pub struct SweepRow {
    /// `Conv(N_in, N_out, K)` on `(BS, N_in, 32, 32)`.
    pub setting: String,
    /// `S`.
    pub block: usize,
    /// Inner rotations issued (dry run).
    pub inner: u64,
    /// Outer rotations issued (dry run).
    pub outer: u64,
    /// Inner + outer.
    pub total: u64,
    /// Eqs. 3 + 4.
    pub analytic: f64,
    /// Table IX's `#Rot`, where printed.
    pub paper: Option<u64>,
    /// Input and output ciphertexts.
    pub cts: (usize, usize),
    /// Within Eq. 7's bound.
    pub within_eq7: bool,
}

/// One Table IX setting's decision.
#[derive(Clone, Debug, Serialize)]
pub struct SweepDecision {
    /// The setting.
    pub setting: String,
    /// Eq. 8 before rounding.
    pub s_star_real: f64,
    /// Eq. 8 rounded to a power of two.
    pub s_star: usize,
    /// The measured minimum.
    pub best: usize,
    /// The paper's minimum.
    pub paper_best: usize,
}

/// The `--table-ix` report.
#[derive(Clone, Debug, Serialize)]
pub struct TableIx {
    /// Slots per ciphertext (`N = 2^15`).
    pub slots: usize,
    /// Every row.
    pub rows: Vec<SweepRow>,
    /// Per setting.
    pub decisions: Vec<SweepDecision>,
}

/// `(BS, N_in, N_out, K)` and the paper's `#Rot` at S = 1, 2, 4, 8 (where printed).
type Setting = (usize, usize, usize, usize, [Option<u64>; 4]);

/// Table IX's settings.
const TABLE_IX: [Setting; 5] = [
    (4, 64, 64, 3, [Some(176), Some(288), Some(1008), None]),
    (8, 64, 64, 3, [Some(288), Some(320), Some(992), None]),
    (8, 128, 32, 9, [None, Some(1648), Some(1008), Some(2224)]),
    (8, 128, 32, 3, [Some(528), Some(304), Some(496), None]),
    (8, 32, 128, 3, [Some(192), Some(496), Some(1984), None]),
];

fn core(step: &'static str) -> impl Fn(veil_core::Error) -> BenchError {
    move |source| BenchError::Core { step, source }
}

/// Runs the sweep at `N = 2^15`.
pub fn table_ix() -> Result<TableIx, BenchError> {
    let slots = 1 << 14;
    let mut rows = Vec::new();
    let mut decisions = Vec::new();
    for &(bs, nin, nout, k, paper) in &TABLE_IX {
        let setting = format!("Conv({nin},{nout},{k}) on ({bs},{nin},32,32)");
        let conv = Conv2d::new(
            nin,
            nout,
            k,
            1,
            k / 2,
            vec![0.01; nout * nin * k * k],
            vec![0.0; nout],
        )
        .map_err(core("the Table IX convolution"))?;
        let ch = choose_block(&conv, bs, 32, 32, slots).map_err(core("the block planner"))?;
        for p in ch.sweep.iter().filter(|p| p.block <= 8) {
            // Confirm the compiled counts with a dry run through the executor.
            let l = FragmentLayout::new(bs, nin, 32, 32, Some(32), p.block, slots)
                .map_err(core("the fragment layout"))?;
            let cp = conv.plan(&l).map_err(core("the convolution plan"))?;
            let sym = SymExec::new(slots);
            let xs: Vec<_> = (0..l.ciphertexts()).map(|_| sym.fresh(2)).collect();
            conv.run(&sym, &cp, &xs, None)
                .map_err(core("the dry run"))?;
            let issued = sym.counts().rotations;
            if issued != p.exact.total() {
                return Err(BenchError::Mismatch {
                    what: "rotations of the dry run against the compiled plan",
                    expected: p.exact.total(),
                    found: issued,
                });
            }
            rows.push(SweepRow {
                setting: setting.clone(),
                block: p.block,
                inner: p.exact.inner,
                outer: p.exact.outer,
                total: issued,
                analytic: plan::analytic(&conv, bs, 32, p.block, slots).total(),
                paper: paper[p.block.trailing_zeros() as usize],
                cts: (p.in_cts, p.out_cts),
                within_eq7: p.within_eq7,
            });
        }
        let paper_best = (0..4)
            .filter_map(|i| paper[i].map(|r| (r, 1usize << i)))
            .min()
            .map_or(0, |x| x.1);
        let best = ch
            .sweep
            .iter()
            .filter(|p| p.block <= 8)
            .min_by_key(|p| (p.exact.total(), p.block))
            .map_or(0, |p| p.block);
        decisions.push(SweepDecision {
            setting,
            s_star_real: ch.s_star_real,
            s_star: ch.s_star,
            best,
            paper_best,
        });
    }
    Ok(TableIx {
        slots,
        rows,
        decisions,
    })
}

/// A text rendering.
pub fn render(t: &TableIx) -> String {
    let mut s = format!(
        "FEnc2 Table IX at n = {} slots (N = 2^15): rotations per batch, dry run of the compiled layer\n\n",
        t.slots
    );
    s += &format!(
        "{:<34} {:>2} {:>6} {:>6} {:>6} {:>8} {:>6} {:>9} {:>4}\n",
        "setting", "S", "inner", "outer", "total", "Eqs.3+4", "paper", "cts in/out", "Eq7"
    );
    for r in &t.rows {
        s += &format!(
            "{:<34} {:>2} {:>6} {:>6} {:>6} {:>8.0} {:>6} {:>4}/{:<4} {:>4}\n",
            r.setting,
            r.block,
            r.inner,
            r.outer,
            r.total,
            r.analytic,
            r.paper.map_or("-".into(), |p| p.to_string()),
            r.cts.0,
            r.cts.1,
            if r.within_eq7 { "ok" } else { "over" }
        );
    }
    s += "\nplanner: Eq. 8 against the measured minimum over S in {1, 2, 4, 8}\n";
    s += &format!(
        "{:<34} {:>8} {:>4} {:>9} {:>11}\n",
        "setting", "Eq.8", "S*", "measured", "paper's min"
    );
    for d in &t.decisions {
        s += &format!(
            "{:<34} {:>8.2} {:>4} {:>9} {:>11}\n",
            d.setting, d.s_star_real, d.s_star, d.best, d.paper_best
        );
    }
    s
}

/// Runs `veil bench cnn`.
pub fn run(a: &BenchCnnArgs) -> Result<String, BenchError> {
    if !a.table_ix {
        return Err(BenchError::InvalidOption {
            option: "--table-ix",
            value: "absent".into(),
            expected: "--table-ix (the block-size sweep; the LeNet benchmark is not built yet)",
        });
    }
    let t = table_ix()?;
    if a.json {
        crate::to_json("the bench cnn report", &t)
    } else {
        Ok(render(&t))
    }
}

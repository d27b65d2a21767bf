//! Which point sets stay resident on a GPU that cannot hold them all: by the device time each
//! byte saves a proving start.
//!
//! A streamed set costs a start the copy of its first piece (nothing to hide it behind), the
//! part of its copies its sums do not hide, and the bucket work of summing in pieces rather
//! than at once; a resident set costs its sums alone. The copies go at the bandwidth measured
//! on the GPU; the sums are modelled from H200 measurements (`ops/bench/gpu-2026-12-04-s.md`:
//! H's 2^27 full-width terms in 1.08 s resident, L's 130M mostly-0/1 terms in 86 ms resident
//! and in ~0.39 s streamed), scaled by the GPU's multiprocessors, and the bucket work of
//! pieces from `ops/bench/gpu-2026-12-05-x.md` (H's sums in four streamed pieces 1.16 s, as
//! resident on an H100 and 7 % over it on an H200). What this ranks, on any 32 GiB PoRep partition: the L and A sets (their
//! sums are short, their copies are not hidden) save more per byte than H (whose sums hide
//! its copies) and than B with its G2 points. The room left after whole sets goes to the first
//! terms of the next set in that order: a prefix saves in proportion to its bytes.

/// Nanoseconds per term of a G1 sum on an H200 (132 multiprocessors): a full-width scalar,
/// and a 0 or 1 (skipped, or added once without buckets).
const FULL_WIDTH_NS: f64 = 8.05;
const ZERO_OR_ONE_NS: f64 = 0.5;
/// A G2 term against a G1 one: the field is twice as wide, its multiplications ~3× the work.
const G2_FACTOR: f64 = 3.0;
/// Multiprocessors the constants were measured on.
const MEASURED_SMS: f64 = 132.0;
/// Extra bucket work of summing in pieces, against the sums at once. It was 0.16 (H: 1.32 s
/// in four pieces against 1.08 s) before a streamed MSM kept its scratch from piece to piece
/// and folded its long bucket chains; at that figure the model ranked H's points above L's,
/// and at 24 and 48 GiB kept H resident while L, copy-bound, waited 0.17 s a start for its
/// copies.
const PIECE_OVERHEAD: f64 = 0.05;
/// Pieces a streamed set is summed in, for the first piece's copy (a 32 GiB set on 16–48 GB).
const PIECES: f64 = 4.0;

/// One point set as the placement sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PointSet {
    pub name: &'static str,
    pub terms: usize,
    /// Device bytes per term: a G1 point, and the G2 point where the set carries the B query
    /// in G2 too.
    pub bytes_per_term: usize,
    /// Whether each term has a G2 point (whose sums cost `G2_FACTOR` times more).
    pub with_g2: bool,
    /// Fraction of the terms whose scalars are neither 0 nor 1.
    pub full_width: f64,
}

impl PointSet {
    pub fn bytes(&self) -> usize {
        self.terms * self.bytes_per_term
    }

    /// Modelled seconds of this set's sums on a GPU of `sms` multiprocessors.
    pub fn sums_s(&self, sms: u32) -> f64 {
        let per_term = self.full_width * FULL_WIDTH_NS + (1.0 - self.full_width) * ZERO_OR_ONE_NS;
        let groups = if self.with_g2 { 1.0 + G2_FACTOR } else { 1.0 };
        self.terms as f64 * per_term * groups * 1e-9 * MEASURED_SMS / f64::from(sms.max(1))
    }

    /// Modelled seconds a start spends on this set when streamed at `bytes_per_s`.
    pub fn streamed_s(&self, sms: u32, bytes_per_s: f64) -> f64 {
        let copy = self.bytes() as f64 / bytes_per_s.max(1.0);
        let sums = self.sums_s(sms);
        copy / PIECES + (copy - sums).max(0.0) + sums * (1.0 + PIECE_OVERHEAD)
    }

    /// Modelled seconds residency saves a start: streamed less resident.
    pub fn saves_s(&self, sms: u32, bytes_per_s: f64) -> f64 {
        self.streamed_s(sms, bytes_per_s) - self.sums_s(sms)
    }
}

/// The placement: how many of each set's first terms are resident, in the order the sets
/// were given, and the modelled seconds of the start's sums with it.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    pub resident_terms: Vec<usize>,
    pub expected_msm_s: f64,
    /// Everything streamed, for comparison in the log.
    pub all_streamed_s: f64,
}

/// Smallest prefix worth making resident (or a sixteenth of a smaller set): below it the copy
/// it saves is lost in the noise.
const MIN_PREFIX_BYTES: usize = 64 << 20;

/// Fills `room` device bytes with the sets that save the most time per byte, whole while they
/// fit, then the first terms of the next one. A set that carries G2 points is placed whole or
/// not at all (its G1 and G2 halves are summed over one sort).
pub fn place(sets: &[PointSet], room: usize, sms: u32, bytes_per_s: f64) -> Placement {
    let mut order: Vec<usize> = (0..sets.len()).collect();
    let per_byte = |s: &PointSet| s.saves_s(sms, bytes_per_s) / s.bytes().max(1) as f64;
    order.sort_by(|&i, &j| per_byte(&sets[j]).total_cmp(&per_byte(&sets[i])));
    let mut resident_terms = vec![0; sets.len()];
    let mut left = room;
    for i in order {
        let set = &sets[i];
        if set.bytes() <= left {
            resident_terms[i] = set.terms;
            left -= set.bytes();
        } else if !set.with_g2 && left >= MIN_PREFIX_BYTES.min(set.bytes() / 16).max(1) {
            resident_terms[i] = left / set.bytes_per_term.max(1);
            left -= resident_terms[i] * set.bytes_per_term;
        }
    }
    let time = |terms: &[usize]| -> f64 {
        sets.iter()
            .zip(terms)
            .map(|(s, &k)| {
                let fraction = k as f64 / s.terms.max(1) as f64;
                s.streamed_s(sms, bytes_per_s) - fraction * s.saves_s(sms, bytes_per_s)
            })
            .sum()
    };
    Placement {
        expected_msm_s: time(&resident_terms),
        all_streamed_s: time(&vec![0; sets.len()]),
        resident_terms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: usize = 1_000_000_000;

    /// A 32 GiB PoRep partition's sets: H full-width, L, A and B mostly 0 and 1 (2 % others),
    /// B with its G2 points.
    fn porep_32g() -> Vec<PointSet> {
        let set = |name, terms, with_g2: bool, full_width| PointSet {
            name,
            terms,
            bytes_per_term: 96 + if with_g2 { 192 } else { 0 },
            with_g2,
            full_width,
        };
        vec![
            set("H", (1 << 27) - 1, false, 1.0),
            set("L", 130_169_893, false, 0.02),
            set("A", 129_757_753, false, 0.02),
            set("B", 33_221_111, true, 0.02),
        ]
    }

    /// The model against measurements: H's sums resident on an H200, L's as well; H and L
    /// streamed whole in four pieces at 55 GB/s on an H100 capped at 16 GiB
    /// (`ops/bench/gpu-2026-12-05-x.md`: 1.24 and 0.25 s).
    #[test]
    fn the_model_matches_the_measurements() {
        let sets = porep_32g();
        let bw = 55e9;
        let h = &sets[0];
        assert!((h.sums_s(132) - 1.08).abs() < 0.01, "{}", h.sums_s(132));
        assert!((h.streamed_s(132, bw) - 1.24).abs() < 0.1);
        let l = &sets[1];
        assert!((l.sums_s(132) - 0.086).abs() < 0.02, "{}", l.sums_s(132));
        assert!((l.streamed_s(132, bw) - 0.25).abs() < 0.05);
        // Fewer multiprocessors: longer sums, the same copies.
        assert!(h.sums_s(66) > 2.0 * h.sums_s(132) - 1e-9);
    }

    /// With the room a 24 GB card leaves (8.4 GB at 32 GiB), L's or A's points are placed
    /// (the two save the same), not H's: streamed, H's sums hide its copies and L and A wait
    /// for their own.
    #[test]
    fn a_24_gb_card_keeps_l_or_a_not_h() {
        let sets = porep_32g();
        let p = place(&sets, 8_400_000_000, 132, 55e9);
        assert_eq!(p.resident_terms[0], 0, "{p:?}");
        let l_or_a = p.resident_terms[1] + p.resident_terms[2];
        assert_eq!(l_or_a, 8_400_000_000 / 96, "{p:?}");
    }

    /// L and A first (their copies are not hidden), then a prefix of the next; H last.
    #[test]
    fn copy_bound_sets_go_first() {
        let sets = porep_32g();
        let p = place(&sets, 30 * GB, 132, 44e9);
        assert_eq!(p.resident_terms[1], sets[1].terms, "{p:?}");
        assert_eq!(p.resident_terms[2], sets[2].terms, "{p:?}");
        assert!(p.resident_terms[0] < sets[0].terms, "{p:?}");
        let used: usize = sets
            .iter()
            .zip(&p.resident_terms)
            .map(|(s, k)| s.bytes_per_term * k)
            .sum();
        assert!(used <= 30 * GB);
        assert!(p.expected_msm_s < p.all_streamed_s);
        // Room for everything: everything, at the resident sums.
        let total: usize = sets.iter().map(PointSet::bytes).sum();
        let all = place(&sets, total, 132, 44e9);
        let want: Vec<usize> = sets.iter().map(|s| s.terms).collect();
        assert_eq!(all.resident_terms, want);
        let sums: f64 = sets.iter().map(|s| s.sums_s(132)).sum();
        assert!((all.expected_msm_s - sums).abs() < 1e-9);
        // No room: nothing.
        assert_eq!(place(&sets, 0, 132, 44e9).resident_terms, vec![0; 4]);
    }

    /// A set with G2 points is whole or absent; a small leftover makes no prefix.
    #[test]
    fn g2_sets_are_whole_and_prefixes_are_worth_it() {
        let sets = porep_32g();
        let b = &sets[3];
        let p = place(std::slice::from_ref(b), b.bytes() - 1, 132, 44e9);
        assert_eq!(p.resident_terms, vec![0]);
        let l = &sets[1];
        let p = place(std::slice::from_ref(l), MIN_PREFIX_BYTES - 1, 132, 44e9);
        assert_eq!(p.resident_terms, vec![0]);
        let p = place(std::slice::from_ref(l), 2 * GB, 132, 44e9);
        assert_eq!(p.resident_terms, vec![2 * GB / 96]);
    }
}

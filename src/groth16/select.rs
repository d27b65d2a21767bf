//! Order-keeping selection of the values a predicate marks present, on all cores: each piece
//! of the input is counted, then gathered to its place in the output. Used to build a query's
//! scalars from the witness (into a vector, or straight into a pinned staging buffer).

use rayon::prelude::*;

/// Input values per parallel task.
const PIECE: usize = 1 << 14;

/// Per piece of `values`, how many are present; `values[j]` is value `first + j` overall.
pub fn count<T: Sync>(
    values: &[T],
    first: usize,
    present: &(dyn Fn(usize) -> bool + Sync),
) -> Vec<usize> {
    values
        .par_chunks(PIECE)
        .enumerate()
        .map(|(p, piece)| {
            let base = first + p * PIECE;
            (base..base + piece.len()).filter(|&i| present(i)).count()
        })
        .collect()
}

/// Writes the present values, in order, to `out`, which holds exactly their number; `counts`
/// is what `count` returned for the same arguments.
pub fn gather<T: Copy + Send + Sync>(
    values: &[T],
    first: usize,
    present: &(dyn Fn(usize) -> bool + Sync),
    counts: &[usize],
    out: &mut [T],
) {
    let mut rest = out;
    let mut places = Vec::with_capacity(counts.len());
    for &n in counts {
        let (place, tail) = rest.split_at_mut(n);
        places.push(place);
        rest = tail;
    }
    places
        .into_par_iter()
        .zip(values.par_chunks(PIECE))
        .enumerate()
        .for_each(|(p, (place, piece))| {
            let base = first + p * PIECE;
            let chosen = piece
                .iter()
                .enumerate()
                .filter(|(j, _)| present(base + j))
                .map(|(_, v)| *v);
            for (slot, v) in place.iter_mut().zip(chosen) {
                *slot = v;
            }
        });
}

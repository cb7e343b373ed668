//! Jain's fairness index (R. Jain, D.-M. Chiu and W. Hawe, "A Quantitative Measure
//! of Fairness and Discrimination for Resource Allocation in Shared Computer
//! Systems", DEC TR-301, 1984).

/// Jain's index `(Σx)² / (n·Σx²)` of `xs`: 1 when all are equal, 1/n when one takes
/// everything; `None` for an empty or all-zero set, where it is undefined (the
/// simulator's summary reads that as 1: nobody was treated unfairly).
pub fn jain(xs: &[f64]) -> Option<f64> {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    (sq > 0.0).then(|| sum * sum / (xs.len() as f64 * sq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_undefined_sets() {
        assert_eq!(jain(&[1.0, 1.0, 1.0]), Some(1.0));
        assert_eq!(jain(&[1.0, 0.0]), Some(0.5));
        assert_eq!(jain(&[5.0, 0.0, 0.0, 0.0]), Some(0.25));
        let j = jain(&[1.0, 2.0, 3.0]).unwrap();
        assert!((j - 36.0 / 42.0).abs() < 1e-12, "{j}");
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[0.0, 0.0]), None);
    }
}

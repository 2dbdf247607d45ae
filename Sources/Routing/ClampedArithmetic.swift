/// Sums and differences of times read from input (stream entry ids, event fields, saved
/// retries): clamped to Int64's range instead of trapping. Bounds are checked where the
/// values are decoded; these make sure no input reaches an overflow trap even so.
extension Int64 {
    /// `self + other`, or `.max` / `.min` past the range.
    func clampedSum(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        guard overflow else { return sum }
        return other > 0 ? .max : .min
    }

    /// `self - other`, or `.max` / `.min` past the range.
    func clampedDifference(_ other: Int64) -> Int64 {
        let (difference, overflow) = subtractingReportingOverflow(other)
        guard overflow else { return difference }
        return other < 0 ? .max : .min
    }
}

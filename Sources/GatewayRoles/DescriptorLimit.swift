import Glibc

/// The process's file-descriptor limit (`RLIMIT_NOFILE`). `pushgw run` raises the soft limit to
/// the hard one at start: the soft default (often 1,024) is a leftover of `select(2)`, which
/// nothing in pushgw uses, and every APNs connection, Redis connection and admin client needs
/// a descriptor (docs/operations.md, "Limits").
package struct DescriptorLimit: Equatable, Sendable {
    /// The limit in force; `Int.max` when unlimited.
    package let soft: Int
    /// The ceiling the soft limit may be raised to without privileges.
    package let hard: Int

    /// The limits now.
    package static func current() -> DescriptorLimit {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return DescriptorLimit(soft: 1_024, hard: 1_024) }
        return DescriptorLimit(soft: count(limit.rlim_cur), hard: count(limit.rlim_max))
    }

    /// Raises the soft limit to the hard one; returns the limits before and after (equal when
    /// nothing changed or the raise was refused).
    @discardableResult
    package static func raiseSoftToHard() -> (before: DescriptorLimit, after: DescriptorLimit) {
        let before = current()
        var limit = rlimit()
        guard before.soft < before.hard, getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return (before, before) }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        return (before, current())
    }

    private static func count(_ value: rlim_t) -> Int {
        value > rlim_t(Int.max) ? Int.max : Int(value)  // RLIM_INFINITY is all ones
    }
}

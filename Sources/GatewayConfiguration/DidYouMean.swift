/// The suggestion after an unknown word ("did you mean …?"), for the config file's keys and
/// the command line's verbs and options alike, so both answer a typo the same way.
package enum DidYouMean {
    /// The candidate within edit distance 2 of `word` (case ignored), if any.
    package static func nearest(_ word: String, among candidates: [String]) -> String? {
        let target = Array(word.lowercased())
        var best: (String, Int)?
        for candidate in candidates {
            let d = editDistance(target, Array(candidate.lowercased()))
            if d <= 2, d < (best?.1 ?? Int.max) { best = (candidate, d) }
        }
        return best?.0
    }

    private static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in stride(from: 1, through: b.count, by: 1) {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}

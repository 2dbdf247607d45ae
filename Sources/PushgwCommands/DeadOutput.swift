import DeadLetters
import VisibleText

/// How `pushgw dead` prints tables (the times, ages and counts are `DeadFormat`'s, shared with
/// the console).
extension DeadFormat {
    /// Rows under a header, columns padded to their widest cell and separated by two spaces;
    /// the last column is not padded. Every cell is written as `TerminalText.field`: a line
    /// break or escape in a call id or reason cannot start a row of its own.
    static func table(_ header: [String], _ rows: [[String]]) -> [String] {
        let all = [header] + rows.map { $0.map(TerminalText.field) }
        var widths = [Int](repeating: 0, count: header.count)
        for row in all {
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        }
        return all.map { row in
            row.enumerated().map { i, cell in
                i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }
    }
}

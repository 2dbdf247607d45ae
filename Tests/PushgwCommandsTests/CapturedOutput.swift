import TestSupport
@testable import PushgwCommands

/// Output of a command, captured line by line.
final class CapturedOutput {
    var out: [String] = []
    var err: [String] = []

    func context(environment: [String: String] = [:], workingDirectory: String = TestScratch.root) -> CommandContext {
        CommandContext(output: CommandOutput(out: { self.out.append($0) }, err: { self.err.append($0) }),
                       environment: environment, workingDirectory: workingDirectory)
    }
}

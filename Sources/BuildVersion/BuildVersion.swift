// BuildVersion: what this build of pushgw is: its version (the VERSION file) and git commit,
// written before each build by the BuildVersion plugin (scripts/build-version.sh says where
// each value comes from and its fallbacks).
// Owns: those two values. Must not: depend on any other module (everything may show them).

/// The version and commit this binary was built from.
public enum BuildVersion {
    /// `0.1.0`: the first line of VERSION; `unknown` when it could not be read.
    public static let version = builtVersion
    /// 12 hex digits of the commit, `-dirty` when the tree had changes, or `unknown` (a build
    /// without git, a tarball not made by `git archive`, no `PUSHGW_BUILD_COMMIT`).
    public static let commit = builtCommit
    /// `pushgw 0.1.0 (commit 1a2b3c4d5e6f)`: what `pushgw --version` prints.
    public static var line: String { "pushgw \(version) (commit \(commit))" }
}

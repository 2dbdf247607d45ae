// The BuildVersion plugin: before every build, scripts/build-version.sh writes the version and
// the git commit into a Swift file of the BuildVersion target (what `pushgw --version` prints).
// A prebuild command, so it runs on each `swift build`, from a clean clone as from `make`.
import Foundation
import PackagePlugin

@main
struct BuildVersion: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let root = context.package.directoryURL
        let out = context.pluginWorkDirectoryURL.appending(path: "generated")
        var environment: [String: String] = [:]
        // A build without .git (a container's context) may name its commit this way.
        if let commit = ProcessInfo.processInfo.environment["PUSHGW_BUILD_COMMIT"] { environment["PUSHGW_BUILD_COMMIT"] = commit }
        if let path = ProcessInfo.processInfo.environment["PATH"] { environment["PATH"] = path }
        return [.prebuildCommand(displayName: "pushgw version and commit",
                                 executable: URL(fileURLWithPath: "/bin/sh"),
                                 arguments: [root.appending(path: "scripts/build-version.sh").path, root.path, out.path],
                                 environment: environment,
                                 outputFilesDirectory: out)]
    }
}

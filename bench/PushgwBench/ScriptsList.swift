import CallStorage
import Foundation

/// `pushgw-bench scripts`: each Lua script the gateway runs, as JSON `{name: source}`, for
/// bench/redis-scripts.sh to name the SHA-1s of Redis' slow log.
enum ScriptsList {
    static func run() {
        var out: [String: String] = [:]
        for (name, source) in ScriptCatalog.all { out[name] = source }
        let data = try! JSONSerialization.data(withJSONObject: out, options: [.sortedKeys])
        FileHandle.standardOutput.write(data)
        FileHandle.standardOutput.write(Data("\n".utf8))
    }
}

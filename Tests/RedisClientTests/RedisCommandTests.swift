import XCTest
@testable import RedisClient

/// `RedisCommand`'s bytes on the wire, without a server (the round trip through a real one is
/// `RedisConnectionTests.testCommandsRoundTripOnTheSelectedDatabase`).
final class RedisCommandTests: XCTestCase {
    /// A command's bytes on the wire are what hiredis's formatter wrote: `*ARGC`, then `$LENGTH`
    /// and the bytes of each argument, each part ending in CRLF.
    func testACommandIsWrittenInRedisProtocol() {
        var command = RedisCommand(reservingBytes: 0, arguments: 3)
        command.append("SET")
        command.append("k:", "1")
        command.append(bytes: Array(repeating: UInt8(ascii: "v"), count: 12) + [0, 13, 10])
        command.append("")
        var out = [UInt8](repeating: 0xee, count: command.respCapacity)
        let written = out.withUnsafeMutableBytes { command.writeRESP(to: $0) }
        XCTAssertEqual(String(decoding: out[..<written], as: UTF8.self),
                       "*4\r\n$3\r\nSET\r\n$3\r\nk:1\r\n$15\r\nvvvvvvvvvvvv\u{0}\r\n\r\n$0\r\n\r\n")
        XCTAssertLessThanOrEqual(written, command.respCapacity)
    }
}

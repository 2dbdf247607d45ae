import EventLoop
import XCTest
@testable import RedisClient

final class RedisURLTests: XCTestCase {
    func testTCPForms() throws {
        XCTAssertEqual(try RedisURL(parsing: "redis://127.0.0.1:6380/2"), RedisURL(endpoint: .tcp(host: "127.0.0.1", port: 6380), db: 2))
        XCTAssertEqual(try RedisURL(parsing: "redis://cache.internal"), RedisURL(endpoint: .tcp(host: "cache.internal", port: 6379)))
        XCTAssertEqual(try RedisURL(parsing: "redis://[::1]:7000/"), RedisURL(endpoint: .tcp(host: "::1", port: 7000)))
        XCTAssertEqual(try RedisURL(parsing: "redis://pushgw:s%40cr%3Aet@h:1/0"),
                       RedisURL(endpoint: .tcp(host: "h", port: 1), user: "pushgw", password: "s@cr:et"),
                       "user and password are percent-decoded")
        XCTAssertEqual(try RedisURL(parsing: "redis://:only-pw@h:1"),
                       RedisURL(endpoint: .tcp(host: "h", port: 1), user: nil, password: "only-pw"),
                       "a password alone authenticates the default user")
        XCTAssertEqual(try RedisURL(parsing: "rediss://pushgw:pw@redis.example.com:6380/1"),
                       RedisURL(endpoint: .tcp(host: "redis.example.com", port: 6380), user: "pushgw", password: "pw", db: 1,
                                usesTLS: true), "rediss:// is TLS")
        XCTAssertFalse(try RedisURL(parsing: "redis://h:1").usesTLS)
    }

    func testUnixForms() throws {
        XCTAssertEqual(try RedisURL(parsing: "unix:///run/redis.sock"), RedisURL(endpoint: .unix(path: "/run/redis.sock")))
        XCTAssertEqual(try RedisURL(parsing: "unix://u:p@/run/redis.sock?db=4"),
                       RedisURL(endpoint: .unix(path: "/run/redis.sock"), user: "u", password: "p", db: 4))
    }

    func testRedactionNeverShowsThePassword() throws {
        let url = try RedisURL(parsing: "redis://pushgw:hunter2-secret@h:1/3")
        XCTAssertEqual(url.redacted, "redis://pushgw:***@h:1/3")
        XCTAssertEqual("\(url)", url.redacted)
        XCTAssertFalse(String(reflecting: url.description).contains("hunter2"))
        XCTAssertEqual(try RedisURL(parsing: "unix://:pw@/s.sock?db=1").redacted, "unix://:***@/s.sock?db=1")
        XCTAssertEqual(try RedisURL(parsing: "rediss://u:hunter2-secret@h:1/0").redacted, "rediss://u:***@h:1/0")
    }

    func testBadURLsNameTheProblemWithoutThePassword() {
        let cases: [(String, String)] = [
            ("127.0.0.1:6379", "expected redis://"),
            ("http://h", "unknown scheme"),
            ("rediss://u:hunter2-secret@:6380", "missing host"),
            ("redis://u:hunter2-secret@h:99999", "port"),
            ("redis://u:hunter2-secret@h:1/x", "database"),
            ("redis://u:hunter2-secret@:1", "missing host"),
            ("unix://u:hunter2-secret@relative.sock", "absolute"),
            ("redis://user@h", "password"),
        ]
        for (text, expected) in cases {
            XCTAssertThrowsError(try RedisURL(parsing: text), text) { error in
                let message = "\(error)"
                XCTAssertTrue(message.contains(expected), "\(text): \(message)")
                XCTAssertFalse(message.contains("hunter2"), "a parse error must not quote the password: \(message)")
            }
        }
    }

    func testBackoffDoublesUpToTheCapWithJitterInTheUpperHalf() {
        let backoff = ReconnectBackoff(baseMs: 50, capMs: 5000)
        XCTAssertEqual((0..<9).map { backoff.delayMs(attempt: $0, unit: 1) }, [50, 100, 200, 400, 800, 1600, 3200, 5000, 5000])
        XCTAssertEqual((0..<9).map { backoff.delayMs(attempt: $0, unit: 0) }, [25, 50, 100, 200, 400, 800, 1600, 2500, 2500])
        XCTAssertEqual(backoff.delayMs(attempt: 10_000, unit: 1), 5000, "huge attempt numbers cannot overflow")
    }
}

import Digests
import XCTest

final class DigestsTests: XCTestCase {
    func testSHA256MatchesTheStandardVectors() {
        XCTAssertEqual(SHA256.hex(Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(SHA256.hex([]), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    func testHMACSHA256MatchesRFC4231AndIsTheSameOverPartsAsOverTheWhole() throws {
        // RFC 4231, test case 2.
        let key = try XCTUnwrap(HMACSHA256(key: Array("Jefe".utf8)))
        let whole = key.mac(Array("what do ya want for nothing?".utf8))
        XCTAssertEqual(Hex.lowercase(whole), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        XCTAssertEqual(key.mac(Array("what do ya ".utf8), [], Array("want for nothing?".utf8)), whole, "the context is reset between MACs")
        XCTAssertTrue(HMACSHA256.equal(whole, key.mac(Array("what do ya want for nothing?".utf8))))
        XCTAssertFalse(HMACSHA256.equal(whole, key.mac(Array("what do ya want for nothing!".utf8))))
        XCTAssertFalse(HMACSHA256.equal(whole, Array(whole.dropLast())))
    }

    func testHexReadsBackOnlyWhatItWrites() {
        let bytes: [UInt8] = [0, 1, 0x7F, 0x80, 0xAB, 0xFF]
        XCTAssertEqual(Hex.lowercase(bytes), "00017f80abff")
        XCTAssertEqual(Hex.bytes(lowercase: "00017f80abff"), bytes)
        XCTAssertEqual(Hex.bytes(lowercase: ""), [])
        for bad in ["0", "0g", "AB", "a b", "abc"] { XCTAssertNil(Hex.bytes(lowercase: bad), bad) }
    }
}

import Crypto
import Testing
import TrackerLogic

/// The frames' HMAC is built on the library's SHA-256, not its generic HMAC (see
/// `FrameMAC`): it must agree with both the library and the RFC, byte for byte.
@Suite struct FrameMACTests {
    func hex(_ digest: SHA256Digest) -> String { digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }

    func tag(_ key: [UInt8], _ message: [UInt8]) -> SHA256Digest {
        message.withUnsafeBytes { FrameMAC(key: key).tag($0) }
    }

    @Test func rfc4231Vectors() {
        // Test case 1: 20 bytes of 0x0b, "Hi There".
        #expect(hex(tag([UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8)))
                == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        // Test case 2: "Jefe", "what do ya want for nothing?".
        #expect(hex(tag(Array("Jefe".utf8), Array("what do ya want for nothing?".utf8)))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        // Test case 6: a 131-byte key (longer than a block, hashed first).
        #expect(hex(tag([UInt8](repeating: 0xaa, count: 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)))
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }

    @Test func agreesWithTheLibrarysHMAC() {
        var rng = SeededGenerator(seed: 0x4D41_43)
        for keyLength in [0, 1, 31, 32, 33, 63, 64, 65, 128] {
            for messageLength in [0, 1, 55, 56, 63, 64, 65, 1000] {
                let key = (0..<keyLength).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                let message = (0..<messageLength).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                let library = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key))
                #expect(Array(tag(key, message)) == Array(library), "key \(keyLength) B, message \(messageLength) B")
            }
        }
    }

    @Test func refusesAnyOtherTag() {
        let mac = FrameMAC(key: [UInt8](repeating: 7, count: 32))
        let message = Array("a frame".utf8)
        let good = Array(message.withUnsafeBytes { mac.tag($0) })
        func valid(_ tag: [UInt8]) -> Bool { tag.withUnsafeBytes { t in message.withUnsafeBytes { mac.isValid(t, for: $0) } } }
        #expect(valid(good))
        for i in good.indices {
            var bad = good
            bad[i] ^= 0x01
            #expect(!valid(bad), "byte \(i) flipped")
        }
        #expect(!valid(Array(good.dropLast())))
        #expect(!valid(good + [0]))
        #expect(!valid([]))
    }
}

import Crypto
import CryptoExtras
import Foundation
import NIOConcurrencyHelpers
import TrackerLogic

/// Dashboard passwords through scrypt (swift-crypto's `KDF.Scrypt`): memory-hard, so a
/// stolen hash costs an attacker memory as well as time for every guess. Only the hash
/// (`PasswordHash`: parameters, salt, derived bytes) is replicated and stored; the clear
/// password lives in a request body for as long as it is derived, and is never logged.
///
/// Each derivation takes about 32 MiB and tens of milliseconds, off the event loops, and
/// at most `maxConcurrent` run at once: a flood of sign-ins queues on them rather than
/// taking the host's memory (the sign-in limits turn most of it away first).
public enum PasswordHasher {
    /// scrypt's cost: N = 2^15, r = 8, p = 1 (OWASP's minimum for scrypt).
    static let logN: UInt8 = 15, blockSize: UInt8 = 8, parallelism: UInt8 = 1
    public static let minLength = 8, maxLength = 1024
    static let maxConcurrent = 2, maxWaiting = 32
    private static let running = NIOLockedValueBox(0), waiting = NIOLockedValueBox(0)

    public struct Problem: Error, CustomStringConvertible {
        public var description: String
    }

    /// Why `password` is not one to set, if it is not.
    public static func refusal(of password: String) -> String? {
        let n = password.utf8.count
        return (minLength...maxLength).contains(n) ? nil : "a password is \(minLength) to \(maxLength) bytes"
    }

    /// A new hash of `password` under a fresh salt.
    public static func hash(_ password: String) async throws -> PasswordHash {
        if let refusal = refusal(of: password) { throw Problem(description: refusal) }
        var rng = SystemRandomNumberGenerator()
        let salt = (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &rng) }
        let derived = try await derive(password, salt: salt, logN: logN, blockSize: blockSize, parallelism: parallelism)
        guard let hash = PasswordHash(encoded: [PasswordHash.scryptFormat, logN, blockSize, parallelism] + salt + derived) else {
            throw Problem(description: "the derived key has the wrong size")
        }
        return hash
    }

    /// Whether `password` is the one `hash` was made from, compared in constant time.
    public static func verify(_ password: String, against hash: PasswordHash) async -> Bool {
        guard password.utf8.count <= maxLength,
              let derived = try? await derive(password, salt: Array(hash.salt), logN: hash.logN, blockSize: hash.blockSize,
                                              parallelism: hash.parallelism) else { return false }
        return zip(derived, hash.derived).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0 && derived.count == hash.derived.count
    }

    static func derive(_ password: String, salt: [UInt8], logN: UInt8, blockSize: UInt8, parallelism: UInt8) async throws -> [UInt8] {
        // At most `maxWaiting` derivations wait for one of the `maxConcurrent` slots.
        guard waiting.withLockedValue({ n in n < maxWaiting ? { n += 1; return true }() : false }) else {
            throw Problem(description: "too many sign-ins at once; retry")
        }
        defer { waiting.withLockedValue { $0 -= 1 } }
        while !running.withLockedValue({ n in n < maxConcurrent ? { n += 1; return true }() : false }) {
            try await Task.sleep(for: .milliseconds(5))
        }
        defer { running.withLockedValue { $0 -= 1 } }
        return try await Task.detached {
            let key = try KDF.Scrypt.deriveKey(from: Array(password.utf8), salt: salt, outputByteCount: 32, rounds: 1 << Int(logN),
                                               blockSize: Int(blockSize), parallelism: Int(parallelism))
            return key.withUnsafeBytes { Array($0) }
        }.value
    }
}

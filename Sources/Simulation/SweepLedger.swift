/// The bookkeeping of a sweep run in child processes, so that a trap takes one seed, not
/// the sweep.
///
/// Why: a node that traps kills the process that runs it; run in-process, a sweep of
/// thousands of seeds would die with no `FAIL seed` line. The parent runs chunks of seeds
/// in children (`tracker simulate --seeds A..B --worker`), each printing `done S H` after
/// every seed (flushed; H is the run's trace hash) and `coverage …` at the end. A child that dies leaves the seed
/// after the last `done` as the culprit: it is reported with its replay command and the
/// rest of the chunk is run again. The process handling is the executable's; this is the
/// part that decides, pure and tested.
public struct SweepLedger: Sendable {
    public private(set) var failures: [(seed: UInt64, text: String)] = []
    public private(set) var coverage = Coverage()
    /// Seeds whose result is known (passed, failed or died).
    public private(set) var finished: UInt64 = 0
    /// Each finished seed's trace hash.
    public private(set) var traceHashes: [UInt64: UInt64] = [:]

    public init() {}

    /// What one child printed and whether it ended normally; returns the seeds still to
    /// run (the rest of a chunk whose child died).
    public mutating func record(seeds: ClosedRange<UInt64>, output: String, exitedNormally: Bool,
                                how: String = "") -> ClosedRange<UInt64>? {
        var block: [String] = []
        var done: UInt64?
        var sawCoverage = false
        for line in output.split(separator: "\n", omittingEmptySubsequences: true) {
            if let (s, hash) = Self.done(line), seeds.contains(s) {
                if !block.isEmpty { failures.append((s, block.joined(separator: "\n"))) }
                block = []
                done = s
                finished += 1
                if let hash { traceHashes[s] = hash }
            } else if line.hasPrefix("coverage "), let c = Coverage(encoded: String(line.dropFirst(9))) {
                coverage.add(c)
                sawCoverage = true
            } else {
                block.append(String(line))
            }
        }
        if exitedNormally && sawCoverage { return nil }
        let culprit = done.map { $0 + 1 } ?? seeds.lowerBound
        guard culprit <= seeds.upperBound else { return nil }
        finished += 1
        failures.append((culprit, "FAIL seed \(culprit): the simulator process died (\(how)): a trap in a node or in the simulator\n"
                         + "  replay: swift run tracker simulate --seed \(culprit) --trace"))
        return culprit < seeds.upperBound ? (culprit + 1)...seeds.upperBound : nil
    }

    /// What a second child printed for the same seeds under another hashing seed: a seed
    /// whose trace differs depends on an unordered collection's iteration order (a
    /// `Dictionary` or `Set` walked where order matters), which no single process can see
    /// (its hashing seed is fixed at launch) and which makes its failures unreplayable.
    public mutating func compareHashOrder(seeds: ClosedRange<UInt64>, output: String) {
        for line in output.split(separator: "\n", omittingEmptySubsequences: true) {
            guard let (s, other) = Self.done(line), seeds.contains(s), let first = traceHashes[s], let other,
                  first != other else { continue }
            failures.append((s, "FAIL seed \(s): the run depends on hash order (trace \(String(first, radix: 16)) in one process, "
                             + "\(String(other, radix: 16)) in another): an unordered collection is walked where order matters\n"
                             + "  replay: run `swift run tracker simulate --seed \(s)` twice and compare the traces"))
        }
    }

    /// `done S` or `done S H` (hexadecimal trace hash).
    static func done(_ line: Substring) -> (UInt64, UInt64?)? {
        let words = line.split(separator: " ")
        guard words.count == 2 || words.count == 3, words[0] == "done", let s = UInt64(words[1]) else { return nil }
        return (s, words.count == 3 ? UInt64(words[2], radix: 16) : nil)
    }
}

import TrackerLogic

/// Reduces a failing scenario to a smaller one that fails the same way.
///
/// Why: a failing seed replays exactly, but its scenario can hold seven nodes, a dozen
/// faults and ten thousand events; the bug usually needs two nodes and one fault. The
/// shrinker tries smaller variants one step at a time — no adversary, a fault fewer, a
/// node fewer, no loss, fewer peers, an earlier end of the faults, … — and keeps each
/// that still fails with the same kind of violation, until none does. The seed stays:
/// what the scenario does not fix (delays, losses, the nodes' randomness) still comes
/// from it, so the result replays exactly from its line. Since any change moves every
/// later draw of the seed, each smaller variant is tried under a few seeds.
public enum Shrinker {
    /// What makes two violations "the same failure": their words with every number
    /// dropped (which node, which transaction and when vary as the scenario shrinks),
    /// the first six of them.
    public static func signature(_ violation: String) -> String {
        var text = Substring(violation)
        if let r = text.firstRange(of: "): ") { text = text[r.upperBound...] } else if let r = text.firstRange(of: "ms: ") { text = text[r.upperBound...] }
        var out = ""
        var inNumber = false
        for ch in text {
            if ch.isNumber {
                if !inNumber { out.append("#") }
                inNumber = true
            } else {
                inNumber = false
                out.append(ch)
            }
        }
        return out.split(separator: " ").prefix(6).joined(separator: " ")
    }

    public struct Outcome: Sendable {
        public var original: Scenario
        public var shrunk: Scenario
        public var report: SimulationReport
        /// Scenarios run while shrinking.
        public var runs: Int
    }

    /// Shrinks `scenario`, which must fail; nil if it passes. `progress` hears each step kept.
    public static func shrink(_ scenario: Scenario, maxRuns: Int = 5000, seedsPerStep: Int = 8,
                              progress: (String) -> Void = { _ in }) -> Outcome? {
        var first = Simulator(scenario: scenario)
        let report = first.run()
        guard let violation = report.violation else { return nil }
        let target = signature(violation)
        var best = scenario, bestReport = report, runs = 1
        var improved = true
        while improved && runs < maxRuns {
            improved = false
            search: for (what, candidate) in smaller(best) {
                // Any change to a scenario moves every draw the seed makes after it (delays,
                // losses), so a smaller scenario may need other timing to fail the same way:
                // a few seeds are tried with each, and the line keeps the one that fails.
                for attempt in 0..<seedsPerStep {
                    guard runs < maxRuns else { break search }
                    runs += 1
                    var tried = candidate
                    if attempt > 0 { tried.seed = candidate.seed &+ UInt64(attempt) &* 0x9E37_79B9_7F4A_7C15 }
                    var sim = Simulator(scenario: tried)
                    let r = sim.run()
                    if let v = r.violation, signature(v) == target {
                        best = tried
                        bestReport = r
                        improved = true
                        progress("\(what)\(attempt > 0 ? " (seed \(tried.seed))" : ""): \(r.events) events")
                        break search
                    }
                }
            }
        }
        return Outcome(original: scenario, shrunk: best, report: bestReport, runs: runs)
    }

    /// One-step-smaller variants of `s`, the biggest cuts first.
    public static func smaller(_ s: Scenario) -> [(String, Scenario)] {
        var out: [(String, Scenario)] = []
        func variant(_ what: String, _ change: (inout Scenario) -> Void) {
            var c = s
            change(&c)
            if c.line != s.line { out.append((what, c)) }
        }
        if s.adversary != nil { variant("no adversary") { $0.adversary = nil } }
        for k in stride(from: s.nodes - 1, through: 0, by: -1) where s.nodes > 1 {
            if let c = removingNode(k, from: s) { out.append(("without s\(k)", c)) }
        }
        for i in s.faults.indices { variant("without fault \(Scenario.word(s.faults[i].fault))") { $0.faults.remove(at: i) } }
        for i in s.operatorActions.indices { variant("without operator action \(i)") { $0.operatorActions.remove(at: i) } }
        if let last = s.faults.map(\.at).max(), last + Milliseconds(1) < s.faultEnd {
            variant("faults end earlier") { $0.faultEnd = last + Milliseconds(max(1, (s.faultEnd - last).value / 2)) }
        }
        variant("no loss") { $0.lossRate = 0 }
        variant("no duplicates") { $0.duplicateRate = 0 }
        variant("no corruption") { $0.corruptRate = 0 }
        variant("no redelivery") { $0.redeliveryRate = 0 }
        variant("no liveness phase") { $0.liveness = nil }
        if let l = s.liveness, !l.down.isEmpty { variant("outsiders cut off, not down") { $0.liveness?.down = [] } }
        variant("whole messages") { $0.fragmentBytes = ClusterChannel.defaultFragmentBytes }
        variant("no clock drift") { $0.clockDrift = Array(repeating: 0, count: s.nodes) }
        variant("less delay") { $0.maxDelay = s.minDelay + (s.maxDelay - s.minDelay) / 2 }
        variant("half the loss") { $0.lossRate = (s.lossRate * 50).rounded(.down) / 100 }
        if s.peers > 1 { variant("a peer fewer") { $0.peers -= 1; $0.httpPeers = min($0.httpPeers, $0.peers) } }
        if s.httpPeers > 0 { variant("an HTTP peer fewer") { $0.httpPeers -= 1 } }
        if s.torrents > 1 { variant("a torrent fewer") { $0.torrents -= 1 } }
        for i in s.faults.indices {
            if case .slow(let n, let d) = s.faults[i].fault, d > 1 {
                variant("slow s\(n) by less") { $0.faults[i].fault = .slow(n, extraDelay: d / 2) }
            }
        }
        return out
    }

    /// `s` without node slot `k`: its faults and actions go, higher slots move down.
    static func removingNode(_ k: Int, from s: Scenario) -> Scenario? {
        var c = s
        c.nodes -= 1
        if k < c.clockDrift.count { c.clockDrift.remove(at: k) }
        func move(_ n: Int) -> Int { n > k ? n - 1 : n }
        c.faults = s.faults.compactMap { f -> Scenario.TimedFault? in
            var f = f
            switch f.fault {
            case .crash(let n), .restart(let n), .shutdown(let n), .join(let n), .storeFails(let n), .storeHeals(let n):
                if n == k { return nil }
                switch f.fault {
                case .crash: f.fault = .crash(move(n))
                case .restart: f.fault = .restart(move(n))
                case .shutdown: f.fault = .shutdown(move(n))
                case .join: f.fault = .join(move(n))
                case .storeFails: f.fault = .storeFails(move(n))
                default: f.fault = .storeHeals(move(n))
                }
            case .slow(let n, let d):
                if n == k { return nil }
                f.fault = .slow(move(n), extraDelay: d)
            case .diskLoss(let n, let w):
                if n == k { return nil }
                f.fault = .diskLoss(move(n), lastWrites: w)
            case .impostor(let n):
                if n == k { return nil }
                f.fault = .impostor(move(n))
            case .pause(let n, let d):
                if n == k { return nil }
                f.fault = .pause(move(n), for: d)
            case .oneWay(let a, let b):
                if a == k || b == k { return nil }
                f.fault = .oneWay(from: move(a), to: move(b))
            case .brokerLink(let n, let cut):
                if n == k { return nil }
                f.fault = .brokerLink(move(n), cut)
            case .partition(let side), .peerNetworkPartition(let side), .brokerPartition(let side):
                let rest = side.filter { $0 != k }.map(move)
                if rest.isEmpty || rest.count >= c.nodes { return nil }
                switch f.fault {
                case .partition: f.fault = .partition(rest)
                case .peerNetworkPartition: f.fault = .peerNetworkPartition(rest)
                default: f.fault = .brokerPartition(rest)
                }
            case .links(let links, let both):
                let rest = links.filter { $0.from != k && $0.to != k }.map { Scenario.Link(from: move($0.from), to: move($0.to)) }
                if rest.isEmpty { return nil }
                f.fault = .links(rest, bothChannels: both)
            case .peerSendsFail(let n?, let span):
                if n == k { return nil }
                f.fault = .peerSendsFail(move(n), for: span)
            case .brokerOutage, .heal, .masterBrokerLink, .peerSendsFail(nil, _):
                break
            }
            return f
        }
        if let l = s.liveness {
            let core = l.core.filter { $0 != k }.map(move), down = l.down.filter { $0 != k }.map(move)
            c.liveness = core.count > c.nodes / 2 ? Scenario.Liveness(core: core, down: down) : nil
        }
        c.operatorActions = s.operatorActions.compactMap { a in
            guard a.slot != k else { return nil }
            var a = a
            a.slot = move(a.slot)
            return a
        }
        // Joining slots are the highest: the ones left must still be.
        let joins = c.faults.compactMap { f -> Int? in if case .join(let n) = f.fault { return n } else { return nil } }
        guard joins.count < c.nodes, Set(joins) == Set((c.nodes - joins.count)..<c.nodes) else { return nil }
        return c
    }
}

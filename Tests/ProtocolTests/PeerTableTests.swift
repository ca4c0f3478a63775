import Testing
import TrackerLogic

/// The peer table scans small swarms and indexes large ones (open addressing with
/// backward-shift deletion). Random announces, stops and expiries that push swarms across
/// both thresholds, in both directions, must leave exactly what a plain dictionary holds.
@Suite("Peer table against a reference")
struct PeerTableTests {
    struct Reference {
        var peers: [PeerKey: PeerRecord] = [:]
        var completed: Set<PeerKey> = []
    }

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func matchesADictionary(seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        var store = SwarmStore()
        var reference = Reference()
        // Few ids and addresses, so that updates of a known peer are common; the range
        // of the population swings between ~0 and ~300 peers.
        var population = 40
        for step in 0..<6000 {
            if step % 1000 == 0 { population = [8, 300, 20, 300, 5, 120][step / 1000] }
            let id = peerID(UInt32(rng.below(population)))
            let ip: IPAddress = rng.below(5) == 0 ? .v6(0x2001_0db8_0000_0000, UInt64(rng.below(3)))
                : .v4(0x0A00_0000 | UInt32(rng.below(3)))
            let key = PeerKey(peerID: id, ip: ip)
            let now = Instant(milliseconds: Int64(step) * 1000)
            switch rng.below(10) {
            case 0...5:
                let event: AnnounceEvent = rng.below(8) == 0 ? .completed : .none
                let a = Announce(infoHash: hashA, peerID: id, endpoint: PeerEndpoint(ip: ip, port: UInt16(1 + rng.below(60000))),
                                 uploaded: Int64(rng.below(1000)), downloaded: 7, left: Int64(rng.below(2)), event: event, at: now)
                store.apply(.announce(a))
                reference.peers[key] = PeerRecord(peerID: id, endpoint: a.endpoint, uploaded: a.uploaded,
                                                  downloaded: 7, left: a.left, lastAnnounce: now)
                if event == .completed { reference.completed.insert(key) }
            case 6...8:
                store.apply(.announce(Announce(infoHash: hashA, peerID: id, endpoint: PeerEndpoint(ip: ip, port: 1),
                                               uploaded: 0, downloaded: 0, left: 0, event: .stopped, at: now)))
                reference.peers[key] = nil
            default:
                let before = Instant(milliseconds: now.milliseconds - Int64(rng.below(400)) * 1000)
                store.apply(.expire(before: before))
                reference.peers = reference.peers.filter { $0.value.lastAnnounce >= before }
            }
            try check(store, reference, rng: &rng, step: step)
        }
    }

    func check(_ store: SwarmStore, _ reference: Reference, rng: inout SeededGenerator, step: Int) throws {
        guard let swarm = store[hashA] else {
            #expect(reference.peers.isEmpty && reference.completed.isEmpty, "step \(step): swarm dropped while it holds peers")
            return
        }
        #expect(swarm.peerCount == reference.peers.count, "step \(step)")
        #expect(swarm.seeders == reference.peers.values.filter(\.isSeeder).count, "step \(step)")
        #expect(swarm.leechers == reference.peers.values.filter { !$0.isSeeder }.count, "step \(step)")
        #expect(swarm.completed == reference.completed.count, "step \(step)")
        for (key, record) in reference.peers { #expect(swarm.peer(key) == record, "step \(step): \(key)") }
        #expect(Set(swarm.peers) == Set(reference.peers.values), "step \(step)")
        // A window holds distinct peers of the requester's family, never the requester.
        let requester = reference.peers.keys.first ?? PeerKey(peerID: peerID(0), ip: .v4(0x0A00_0000))
        let window = swarm.selectPeers(for: requester, count: 50, rng: &rng).endpoints
        let sameFamily = reference.peers.filter { $0.key.ip.family == requester.ip.family && $0.key != requester }
        #expect(window.count == min(50, sameFamily.count), "step \(step)")
        #expect(Set(window).isSubset(of: Set(sameFamily.values.map(\.endpoint))), "step \(step)")
    }
}

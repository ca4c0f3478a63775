import Testing
import TrackerLogic

/// The digests are part of the cluster protocol: a node votes with a transaction's
/// digest and compares repositories by theirs, and during a rolling upgrade nodes of two
/// versions do both with each other (docs/operating/deploy.md, section 7). A change that moves
/// these values, however fast, splits such a cluster; it needs a protocol version. Pinned
/// here (the values of e2b5250) so that such a change cannot pass unnoticed.
@Suite struct DigestValueTests {
    static let hash = InfoHash(a: 0x0102_0304_0506_0708, b: 0x090A_0B0C_0D0E_0F10, c: 0x1112_1314)

    static func announce(_ id: UInt64, _ ip: IPAddress, _ event: AnnounceEvent) -> SwarmUpdate {
        .announce(Announce(infoHash: hash, peerID: PeerID(a: id, b: ~id, c: 7), endpoint: PeerEndpoint(ip: ip, port: 6881),
                           uploaded: 1 << 33, downloaded: 5, left: Int64(id % 2), event: event,
                           at: Instant(milliseconds: 1_700_000_000_000 + Int64(id))))
    }

    static let updates: [SwarmUpdate] = [
        announce(1, .v4(0x0A00_0001), .started),
        announce(2, .v6(0x2001_0DB8_0000_0000, 2), .completed),
        announce(3, .v4(0x0A00_0003), .none),
        announce(1, .v4(0x0A00_0001), .stopped),
    ]

    @Test func aTransactionsDigest() {
        let tx = Transaction(ref: TxRef(epoch: Epoch(term: 3, master: NodeID(2)), txid: 41), updates: Self.updates)
        #expect(tx.digest == 0xE462_85E7_0C60_9138)
    }

    @Test func aRepositorysDigestKeptAndRecomputed() {
        var store = SwarmStore()
        store.apply(Self.updates)
        #expect(Digest.of(store) == 0x07FC_EDC9_F331_B3A7, "the stop is part of it (`PeerStops`)")
        #expect(Digest.recomputed(store) == Digest.of(store))
    }

    /// A peer that announces again replaces its record: the repository's digest drops the
    /// old record's element and adds the new one's (`Digest.elements(_:replacing:with:)`,
    /// which hashes the key they share once), by a new port and new totals, as a merge
    /// of a newer record does.
    @Test func aRepositorysDigestAfterPeersAnnouncedAgain() {
        var store = SwarmStore()
        store.apply(Self.updates)
        guard case .announce(var again) = Self.announce(3, .v4(0x0A00_0003), .none),
              case .announce(var six) = Self.announce(2, .v6(0x2001_0DB8_0000_0000, 2), .none) else { return }
        again.endpoint.port = 51413; again.uploaded = 1 << 40; again.left = 0; again.at = Instant(milliseconds: 1_700_000_060_000)
        six.downloaded = 77; six.at = Instant(milliseconds: 1_700_000_061_000)
        store.apply([.announce(again), .announce(six)])
        let newer = PeerRecord(peerID: again.peerID, endpoint: PeerEndpoint(ip: again.endpoint.ip, port: 6881),
                               uploaded: 3, downloaded: 4, left: 5, lastAnnounce: Instant(milliseconds: 1_700_000_090_000))
        store.apply([.merge(SwarmMerge(infoHash: Self.hash, peers: [newer], completed: []))])
        #expect(Digest.of(store) == 0xE9B7_A786_48D8_F5E2)
        #expect(Digest.recomputed(store) == Digest.of(store))
    }
}

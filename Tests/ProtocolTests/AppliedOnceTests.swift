import Testing
import TrackerLogic

/// Each transaction is applied at most once, whatever reaches the node again: the channel's
/// replay window drops a network's duplicate frames before any role sees them, so these
/// tests hand the roles the same decision again as fresh frames (a master retransmitting,
/// a second path) and check the guards of the roles and of the replica themselves.
@Suite("Each transaction is applied at most once") struct AppliedOnceTests {
    let t0 = Instant(milliseconds: 7_000_000)
    let e3 = n3Epoch
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))

    func fromMaster(_ message: ClusterMessage) -> NodeEvent {
        .cluster(ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: e3, to: nil, message: message))
    }

    /// An announce of a peer whose address is `octet`: applying it twice would count it
    /// twice (the completed counter, the applied count), not only set a record again.
    func transaction(_ txid: UInt64, peer octet: UInt8) -> Transaction {
        let announce = Announce(infoHash: InfoHash(a: 7, b: 7, c: 7), peerID: PeerID(a: UInt64(octet), b: 0, c: 0),
                                endpoint: PeerEndpoint(ip: .v4(0x0A00_0000 | UInt32(octet)), port: 6881), uploaded: 0,
                                downloaded: 0, left: 0, event: .completed, at: t0)
        return Transaction(ref: TxRef(epoch: e3, txid: txid), updates: [.announce(announce)])
    }

    func persists(_ actions: [NodeAction]) -> Int {
        actions.filter { if case .persist = $0 { true } else { false } }.count
    }

    @Test func aReplicaRefusesATransactionItAppliedAlready() {
        var replica = Replica()
        let one = transaction(1, peer: 1), two = transaction(2, peer: 2)
        let firsts = [replica.commit(one), replica.commit(two)]
        let (applied, digest) = (replica.applied, replica.digest)
        let agains = [replica.commit(two), replica.commit(one)]
        #expect(firsts == [true, true])
        #expect(agains == [false, false])
        #expect(replica.applied == applied)
        #expect(replica.digest == digest)
        #expect(replica.lastCommitted == two.ref)
        #expect(replica.retained.map(\.ref) == [one.ref, two.ref])
        #expect(replica.check() == nil)
    }

    /// A slave that committed e1.3#2 hears its COMMIT again, then its PREPARE and COMMIT
    /// again, then a catch-up that carries both transactions: it votes OK for the same
    /// transaction, and applies and writes nothing a second time.
    @Test func aSlaveAppliesTheLastTransactionOnceWhateverRepeatsIt() {
        var (n, t) = n2FollowingN3(from: t0, ids: ids)
        let one = transaction(1, peer: 1), two = transaction(2, peer: 2)
        t = t + Milliseconds(10)
        func at(_ ms: Int64) -> Instant { t + Milliseconds(ms) }
        /// How many transactions the node handed its store in the step.
        func written(_ message: ClusterMessage, at ms: Int64) -> Int { persists(n.stepEchoing(fromMaster(message), now: at(ms))) }
        _ = n.stepEchoing(fromMaster(.prepare(one, previous: .zero, previousDigest: 0)), now: t)
        let w1 = written(.commit(one.ref, digest: one.digest), at: 1)
        #expect(w1 == 1)
        _ = n.stepEchoing(fromMaster(.prepare(two, previous: one.ref, previousDigest: one.digest)), now: at(2))
        let w3 = written(.commit(two.ref, digest: two.digest), at: 3)
        #expect(w3 == 1)
        #expect(n.replica.lastCommitted == two.ref)
        let (applied, digest) = (n.replica.applied, n.replica.digest)

        let w4 = written(.commit(two.ref, digest: two.digest), at: 4)
        #expect(w4 == 0)
        let votes = n.stepEchoing(fromMaster(.prepare(two, previous: one.ref, previousDigest: one.digest)), now: at(5))
            .compactMap { if case .send(let env) = $0, case .vote = env.message { return env.message } else { return nil } }
        #expect(votes == [.vote(txid: 2, digest: two.digest, verdict: .ok)])
        let w6 = written(.commit(two.ref, digest: two.digest), at: 6)
        #expect(w6 == 0)
        let w7 = written(.catchUp(after: .zero, [one, two]), at: 7)
        #expect(w7 == 0)

        #expect(n.replica.applied == applied)
        #expect(n.replica.digest == digest)
        #expect(n.replica.lastCommitted == two.ref)
        #expect(n.check() == nil)
    }
}

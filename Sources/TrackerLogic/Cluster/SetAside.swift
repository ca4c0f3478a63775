/// A diverged repository set aside for its merge, while the node follows its master.
///
/// Why: a node whose repository is not a prefix of the master's offers it for merging,
/// and the master commits the merge through two-phase commit. Until that commit, a node
/// that kept its diverged repository as its replica could only vote not-in-sync, so a
/// quorum that needed its vote (`strict`, or a cluster with no other live node) never
/// committed the merge that would bring it back: the cluster stood still.
///
/// The rule: on MERGE-REQUEST the node writes its offer to its disk beside the
/// repository (`NodeAction.setAside`), empties the repository and takes the master's
/// state like any fresh node, so it votes again at once. The offer stays on disk, and is
/// sent to whichever master the node follows each keepalive interval, until that master
/// answers MERGE-DONE for it; a node that leads merges its own set-aside offer as a
/// slave's. A restart reads it back (`DurableState.setAside`), and a clean stop leaves it
/// (what the cluster may not hold is not the repository a clean stop empties).
///
/// Invariants: the offer reaches the disk before the repository is emptied (both are
/// store actions, performed in order); at most one offer is set aside (a node that
/// diverges again folds its new offer into it); it is dropped only on a MERGE-DONE for
/// its id, which a master sends once every part is committed or already held.
struct SetAside: Sendable, Equatable {
    var parts: [MergeOffer]
    var resendAt: Instant

    var offerID: UInt64 { parts.first?.offerID ?? 0 }

    /// A merge offer carries at most this many swarms per part.
    static let partSwarms = 64

    /// `content`, torrents, access rules, client rules and users as offer parts of at most
    /// `partSwarms` swarms each, under `offerID`.
    static func parts(offerID: UInt64, swarms content: [SwarmMerge], torrents: [RegisteredTorrent],
                      access: [AccessEntry], clients: [ClientRuleEntry] = [], users: [User] = []) -> [MergeOffer] {
        var chunks = stride(from: 0, to: content.count, by: SetAside.partSwarms).map {
            Array(content[$0..<min($0 + SetAside.partSwarms, content.count)])
        }
        if chunks.isEmpty { chunks = [[]] }
        return chunks.enumerated().map {
            MergeOffer(offerID: offerID, part: UInt32(truncatingIfNeeded: $0.offset), parts: UInt32(truncatingIfNeeded: chunks.count),
                       swarms: $0.element, torrents: $0.offset == 0 ? torrents : [], access: $0.offset == 0 ? access : [],
                       clients: $0.offset == 0 ? clients : [], users: $0.offset == 0 ? users : [])
        }
    }

    /// Parts read back from a disk: one offer's, each numbered once, or nothing.
    static func restored(_ parts: [MergeOffer]) -> [MergeOffer] {
        guard let first = parts.first, parts.count <= Int(ClusterCodec.maxOfferParts),
              parts.enumerated().allSatisfy({ $0.element.offerID == first.offerID && $0.element.part == UInt32($0.offset)
                  && $0.element.parts == UInt32(parts.count) }) else { return [] }
        return parts
    }
}

extension NodeContext {
    /// Sets the replica's diverged content aside (with what an earlier offer still holds),
    /// then empties the replica: the node is a fresh one to its master.
    mutating func setAsideDivergedReplica(_ now: Instant) {
        let store = repo.replica.store
        var swarms = store.content(), torrents = store.catalogue.sorted, access = store.catalogue.access.sortedRules
        var clients = store.catalogue.access.clients.sortedRules, users = store.catalogue.access.users.sorted
        for part in repo.setAside?.parts ?? [] {
            swarms += part.swarms; torrents += part.torrents; access += part.access; clients += part.clients; users += part.users
        }
        if !swarms.isEmpty || !torrents.isEmpty || !access.isEmpty || !clients.isEmpty || !users.isEmpty {
            let parts = SetAside.parts(offerID: rng.next(), swarms: swarms, torrents: torrents, access: access, clients: clients, users: users)
            repo.setAside = SetAside(parts: parts, resendAt: now)
            outbox.actions.append(.setAside(parts))
            meters.paths.count(.divergedStateSetAside)
        }
        repo.prepared = nil
        wipeLocally()
    }

    /// MERGE-DONE for the offer set aside: the master holds it all.
    mutating func mergeDone(offerID: UInt64) {
        guard let s = repo.setAside, s.offerID == offerID else { return }
        repo.setAside = nil
        outbox.actions.append(.setAside([]))
        meters.paths.count(.mergeCompleted)
    }

    /// Sends the set-aside offer to `master` when it is due.
    mutating func offerSetAside(to master: NodeID, _ now: Instant) {
        guard let s = repo.setAside, now >= s.resendAt else { return }
        for part in s.parts { send(.mergeOffer(part), to: master) }
        repo.setAside?.resendAt = now + config.keepaliveInterval
    }
}

extension Master {
    /// A master with an offer set aside merges it as it would a slave's, once.
    mutating func mergeSetAside(in ctx: inout NodeContext, _ now: Instant) {
        guard let s = ctx.repo.setAside else { return }
        let key = OfferKey(node: ctx.id, offerID: s.offerID)
        guard offers[key] == nil else { return }
        for part in s.parts { mergeOfferReceived(part, from: ctx.id, in: &ctx, now) }
    }
}

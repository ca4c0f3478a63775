/// The operator's data (registered torrents, the access policy) through a clean stop.
///
/// Why: a clean stop empties the repository, as the spec says, and peers and swarms are
/// soft state their peers announce again; the catalogue is not. A cluster whose nodes all
/// stopped must come back with it, and nodes that stopped at different times hold
/// different versions of it: the newest change to each entry wins, a removal included.
///
/// How: a clean stop keeps every catalogue entry and tombstone with its stamp
/// (`Catalogue.keptEntries`), merged with what an earlier stop kept and is not back yet.
/// At the next start the node offers them as `CatalogueChange.restore`, which every
/// replica applies entry by entry, newest stamp winning: a master first thing, with what
/// it recovered (so the policy holds before its first answer); a slave once in sync, as
/// an operator change. It offers again every other keepalive interval until its replica
/// holds every kept entry or something newer (`Catalogue.dominates`), then drops them;
/// after `maxKeptOffers` offers it stops asking and keeps them on disk for the next start
/// (a catalogue with no room left for a kept torrent never takes it).
extension TrackerNode {
    static let maxKeptOffers = 30

    /// A clean stop: what to keep, for the wipe to leave. Each entry's newest version, and
    /// each registered torrent's swarms' completion counts (the highest), from every
    /// state the node holds that the cluster may not: the replica, what an earlier stop
    /// kept, and a recovering master's own diverged state whose merge has not committed
    /// (`DivergedOnDisk`). Without the last, a registration a master
    /// committed alone in a partition, then set aside for the majority's snapshot, was
    /// lost when the node stopped cleanly before the merge carrying it back committed.
    func keptAtStop() -> [KeptEntry] {
        var newest: [KeptEntry.Key: KeptEntry] = [:]
        var entries = ctx.repo.kept
        for store in [ctx.repo.replica.store] + (divergedOnDisk.map { [$0.store] } ?? []) {
            entries += store.catalogue.keptEntries + store.keptCompletionCounts
        }
        for e in entries {
            guard let old = newest[e.key] else { newest[e.key] = e; continue }
            if case .completed(let h, let n) = e, case .completed(_, let m) = old {
                newest[e.key] = .completed(h, max(n, m))
            } else if old.ref < e.ref {
                newest[e.key] = e
            }
        }
        return newest.values.sorted { $0.key < $1.key }
    }

    /// Each tick: once in sync with a master (or serving as one), offer what is kept and
    /// not yet held; drop it once all of it is.
    mutating func offerKeptData(_ now: Instant) {
        guard !ctx.repo.kept.isEmpty, now >= ctx.repo.nextKeptOffer else { return }
        // Only a replica that is the cluster's says what the cluster holds (a restored or
        // diverged one may be given up for the master's).
        switch state {
        case .slave(let s) where s.master != nil && s.inSync(ctx): break
        case .master where isServing: break
        default: return
        }
        let catalogue = ctx.repo.replica.store.catalogue
        let pending = ctx.repo.kept.filter { !catalogue.dominates($0) }
        guard !pending.isEmpty else {
            ctx.repo.kept = []
            ctx.outbox.actions.append(.dropKeptOperatorData)
            return
        }
        ctx.repo.kept = pending
        guard ctx.repo.keptOffers < Self.maxKeptOffers else { return }
        ctx.repo.keptOffers += 1
        ctx.repo.nextKeptOffer = now + ctx.config.keepaliveInterval * 2
        ctx.meters.paths.count(.keptDataOffered)
        for change in Catalogue.restoring(pending) { dispatch(.submit(change), now) }
    }
}

extension KeptEntry {
    /// Which catalogue entry it is about: two kept versions of one key, the newer wins.
    struct Key: Hashable, Comparable {
        var kind: UInt8
        var hash: InfoHash
        /// A client rule's prefix or a user's name (empty for other kinds).
        var prefix: [UInt8] = []
        static func < (l: Key, r: Key) -> Bool {
            (l.kind, l.hash) != (r.kind, r.hash) ? (l.kind, l.hash) < (r.kind, r.hash) : l.prefix.lexicographicallyPrecedes(r.prefix)
        }
    }

    var key: Key {
        switch self {
        case .torrent(let t, _): Key(kind: 1, hash: t.infoHash)
        case .torrentRemoved(let h, _): Key(kind: 1, hash: h)
        case .rule(let h, _, _), .ruleRemoved(let h, _): Key(kind: 2, hash: h)
        case .mode: Key(kind: 3, hash: InfoHash(a: 0, b: 0, c: 0))
        case .completed(let h, _): Key(kind: 4, hash: h)
        case .client(let p, _, _), .clientRemoved(let p, _): Key(kind: 5, hash: InfoHash(a: 0, b: 0, c: 0), prefix: p.bytes)
        case .user(let u, _): Key(kind: 6, hash: InfoHash(a: 0, b: 0, c: 0), prefix: Array(u.name.text.utf8))
        case .userRemoved(let n, _): Key(kind: 6, hash: InfoHash(a: 0, b: 0, c: 0), prefix: Array(n.text.utf8))
        }
    }
}

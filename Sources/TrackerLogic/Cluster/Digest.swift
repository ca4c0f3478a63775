/// A keyed 64-bit fingerprint, chained over words. Fixed key: digests must agree
/// across nodes and runs. Not a security boundary, only a consistency check.
public struct Digest: Sendable {
    private static let hasher = SipHash24(k0: 0x5452_4143_4B45_5221, k1: 0x4449_4745_5354_2121)
    public private(set) var value: UInt64 = 0x6A09_E667_F3BC_C908

    public init() {}

    public mutating func add(_ a: UInt64, _ b: UInt64 = 0, _ c: UInt64 = 0) {
        value = Self.hasher.hash(value ^ a, b, c)
    }

    public mutating func add(_ h: Bytes20) { add(h.a, h.b, UInt64(h.c)) }

    public mutating func add(_ ip: IPAddress) {
        switch ip {
        case .v4(let v): add(4, UInt64(v))
        case .v6(let hi, let lo): add(6, hi, lo)
        }
    }

    public mutating func add(_ record: PeerRecord) {
        add(record.peerID)
        add(record.endpoint.ip)
        add(UInt64(record.endpoint.port), UInt64(bitPattern: record.uploaded), UInt64(bitPattern: record.downloaded))
        add(UInt64(bitPattern: record.left), UInt64(bitPattern: record.lastAnnounce.milliseconds))
    }

    public mutating func add(_ update: SwarmUpdate) {
        switch update {
        case .announce(let a):
            add(1, UInt64(a.event.rawValue))
            add(a.infoHash)
            add(PeerRecord(a))
            if let k = a.trackerKey { add(bytes: k.bytes) }
        case .expire(let before):
            add(2, UInt64(bitPattern: before.milliseconds))
        case .merge(let m):
            add(3, UInt64(m.peers.count), UInt64(m.completed.count))
            add(m.infoHash)
            for p in m.peers { add(p) }
            for k in m.completed { add(k.peerID); add(k.ip) }
            add(0x57, UInt64(m.stops.count))
            for stop in m.stops { add(stop.key.peerID); add(stop.key.ip); add(UInt64(bitPattern: stop.at.milliseconds)) }
        case .catalogue(.register(let t)):
            add(4, UInt64(t.file.count), UInt64(bitPattern: t.registeredAt.milliseconds))
            add(t.infoHash)
            add(Self.fileDigest(t.file))
        case .catalogue(.unregister(let hash)):
            add(5)
            add(hash)
        case .catalogue(.setAccessMode(let mode)):
            add(6, UInt64(mode.rawValue))
        case .catalogue(.setAccessRule(let rule, let hashes)):
            add(7, UInt64(rule.rawValue), UInt64(hashes.count))
            for h in hashes { add(h) }
        case .catalogue(.removeAccessRules(let hashes)):
            add(7, 0, UInt64(hashes.count))
            for h in hashes { add(h) }
        case .catalogue(.setClientRule(let rule, let prefixes)):
            add(9, UInt64(rule.rawValue), UInt64(prefixes.count))
            for p in prefixes { add(p) }
        case .catalogue(.removeClientRules(let prefixes)):
            add(9, 0, UInt64(prefixes.count))
            for p in prefixes { add(p) }
        case .catalogue(.addUser(let u)):
            add(10, 1)
            add(u)
        case .catalogue(.editUser(let n, let edit)):
            add(10, 2)
            add(bytes: Array(n.text.utf8))
            switch edit {
            case .role(let r): add(1, UInt64(r.rawValue))
            case .key(let k): add(2, k == nil ? 0 : 1); add(bytes: k?.bytes ?? [])
            case .enabled(let e): add(3, e ? 1 : 0)
            case .password(let p): add(4, p == nil ? 0 : 1); add(bytes: p?.encoded ?? [])
            }
        case .catalogue(.removeUser(let n)):
            add(10, 3)
            add(bytes: Array(n.text.utf8))
        case .catalogue(.restore(let entries)):
            add(8, UInt64(entries.count))
            for e in entries {
                switch e {
                case .torrent(let t, _):
                    add(1, UInt64(t.file.count), UInt64(bitPattern: t.registeredAt.milliseconds))
                    add(t.infoHash)
                    add(Self.fileDigest(t.file))
                case .torrentRemoved(let h, _): add(2); add(h)
                case .rule(let h, let rule, _): add(3, UInt64(rule.rawValue)); add(h)
                case .ruleRemoved(let h, _): add(4); add(h)
                case .mode(let mode, _): add(5, UInt64(mode.rawValue))
                case .completed(let h, let count): add(6, UInt64(clamping: count)); add(h)
                case .client(let p, let rule, _): add(7, UInt64(rule.rawValue)); add(p)
                case .clientRemoved(let p, _): add(8); add(p)
                case .user(let u, _): add(9); add(u)
                case .userRemoved(let n, _): add(10); add(bytes: Array(n.text.utf8))
                }
                add(e.ref.epoch.packed, e.ref.txid)
            }
        }
    }

    /// A client prefix: its length, then its bytes as eight-byte words.
    mutating func add(_ prefix: ClientPrefix) {
        var words: [UInt64] = [0, 0, 0]
        for (i, byte) in prefix.bytes.enumerated() { words[i / 8] |= UInt64(byte) << (56 - 8 * UInt64(i % 8)) }
        add(UInt64(prefix.bytes.count), words[0], words[1])
        add(words[2])
    }

    /// A user whole: name, role, enabled flag, key and password hash.
    mutating func add(_ user: User) {
        add(bytes: Array(user.name.text.utf8))
        add(UInt64(user.role.rawValue), user.enabled ? 1 : 0, (user.key == nil ? 0 : 2) | (user.password == nil ? 0 : 1))
        add(bytes: user.key?.bytes ?? [])
        add(bytes: user.password?.encoded ?? [])
        let t = user.totals
        if !t.isZero { add(0x70, t.announces, t.completed); add(t.uploaded, t.downloaded) }
    }

    /// Bytes of any length: the length, then the bytes folded (`fileDigest`).
    mutating func add(bytes: [UInt8]) { add(UInt64(bytes.count), Self.fileDigest(bytes)) }

    /// The file's bytes, folded eight at a time.
    static func fileDigest(_ file: [UInt8]) -> UInt64 {
        var d = Digest()
        var i = 0
        while i < file.count {
            var word: UInt64 = 0
            for j in i..<min(i + 8, file.count) { word = word << 8 | UInt64(file[j]) }
            d.add(word, UInt64(i))
            i += 8
        }
        return d.value
    }

    /// What one peer of a swarm adds to the repository's digest.
    static func element(_ infoHash: InfoHash, _ record: PeerRecord) -> UInt64 {
        var d = Digest()
        d.add(infoHash)
        d.add(record)
        return d.value
    }

    /// `element(infoHash, old)` and `element(infoHash, new)`, for a record that replaces
    /// another of the same peer (a peer announcing again, a merge's newer record): the
    /// chain up to the key they share (info hash, peer id, address) is hashed once, the
    /// rest of both chains in lockstep. Every re-announce on every replica pays this, and
    /// it is about a third of the digest's cost of one.
    static func elements(_ infoHash: InfoHash, replacing old: PeerRecord, with new: PeerRecord) -> (old: UInt64, new: UInt64) {
        guard old.key == new.key else { return (element(infoHash, old), element(infoHash, new)) }
        var key = Digest()
        key.add(infoHash)
        key.add(new.peerID)
        key.add(new.endpoint.ip)
        // `add(record)`'s last two steps, on each record.
        let (o, n) = hasher.hash(
            (key.value ^ UInt64(old.endpoint.port), UInt64(bitPattern: old.uploaded), UInt64(bitPattern: old.downloaded)),
            (key.value ^ UInt64(new.endpoint.port), UInt64(bitPattern: new.uploaded), UInt64(bitPattern: new.downloaded)))
        return hasher.hash((o ^ UInt64(bitPattern: old.left), UInt64(bitPattern: old.lastAnnounce.milliseconds), 0),
                           (n ^ UInt64(bitPattern: new.left), UInt64(bitPattern: new.lastAnnounce.milliseconds), 0))
    }

    /// What one completion of a swarm adds.
    static func element(_ infoHash: InfoHash, completion key: PeerKey) -> UInt64 {
        var d = Digest()
        d.add(0xC0, 0, 0)
        d.add(infoHash)
        d.add(key.peerID)
        d.add(key.ip)
        return d.value
    }

    /// What one peer's stop adds (`PeerStops`).
    static func element(_ infoHash: InfoHash, stop: PeerStop) -> UInt64 {
        var d = Digest()
        d.add(0x57, UInt64(bitPattern: stop.at.milliseconds), 0)
        d.add(infoHash)
        d.add(stop.key.peerID)
        d.add(stop.key.ip)
        return d.value
    }

    /// What one registered torrent adds.
    static func element(_ t: RegisteredTorrent) -> UInt64 {
        var d = Digest()
        d.add(0x70, UInt64(t.file.count), UInt64(bitPattern: t.registeredAt.milliseconds))
        d.add(t.infoHash)
        d.add(fileDigest(t.file))
        return d.value
    }

    /// What the access mode adds (nothing while open, the default).
    static func element(_ mode: AccessMode) -> UInt64? {
        guard mode != .open else { return nil }
        var d = Digest()
        d.add(0xA0, UInt64(mode.rawValue))
        return d.value
    }

    /// What a swarm's completion base adds.
    static func element(_ hash: InfoHash, completedBase count: Int) -> UInt64 {
        var d = Digest()
        d.add(0xCB, UInt64(clamping: count))
        d.add(hash)
        return d.value
    }

    /// What one access rule adds.
    static func element(_ hash: InfoHash, _ rule: AccessRule) -> UInt64 {
        var d = Digest()
        d.add(0xAC, UInt64(rule.rawValue))
        d.add(hash)
        return d.value
    }

    /// What one client rule adds.
    static func element(_ prefix: ClientPrefix, _ rule: AccessRule) -> UInt64 {
        var d = Digest()
        d.add(0xC1, UInt64(rule.rawValue))
        d.add(prefix)
        return d.value
    }

    /// What one user adds.
    static func element(_ user: User) -> UInt64 {
        var d = Digest()
        d.add(0x05E4)
        d.add(user)
        return d.value
    }

    /// The sum and count of the catalogue's elements a change touches, as they stand (a
    /// hash named twice is one element).
    static func elements(touchedBy change: CatalogueChange, in catalogue: Catalogue) -> (sum: UInt64, count: Int) {
        var sum: UInt64 = 0, count = 0
        func add(_ element: UInt64?) { if let element { sum &+= element; count += 1 } }
        let touched = change.touched
        for h in Set(touched.torrents) { add(catalogue.torrents[h].map(element)) }
        for h in Set(touched.rules) { add(catalogue.access.rules[h].map { element(h, $0) }) }
        for h in Set(touched.completedBases) { add(catalogue.completedBase[h].map { element(h, completedBase: $0) }) }
        if touched.mode { add(element(catalogue.access.mode)) }
        for p in Set(touched.clients) { add(catalogue.access.clients.rules[p].map { element(p, $0) }) }
        for n in Set(touched.users) { add(catalogue.access.users[n].map(element)) }
        return (sum, count)
    }

    /// The sum and count of a whole access policy's elements.
    static func elements(of access: AccessPolicy) -> (sum: UInt64, count: Int) {
        var sum: UInt64 = 0, count = 0
        if let m = element(access.mode) { sum &+= m; count += 1 }
        for (h, rule) in access.rules { sum &+= element(h, rule); count += 1 }
        for (p, rule) in access.clients.rules { sum &+= element(p, rule); count += 1 }
        for u in access.users.users.values { sum &+= element(u); count += 1 }
        return (sum, count)
    }

    /// Order-independent fingerprint of a whole repository: replicas that hold the same
    /// peers, completions and torrents agree whatever order their tables store them in.
    /// The sum of every element's digest and their count, which the store keeps up to date
    /// change by change: O(1), so a status page or a checker may ask at every commit.
    public static func of(_ store: SwarmStore) -> UInt64 {
        store.keepsDigest ? finish(sum: store.digestSum, count: store.digestCount) : recomputed(store)
    }

    /// The same fingerprint from a pass over every element: what the kept sums must equal.
    public static func recomputed(_ store: SwarmStore) -> UInt64 {
        var total: UInt64 = 0
        var count: UInt64 = 0
        for (hash, swarm) in store.swarms {
            for record in swarm.peers { total &+= element(hash, record); count &+= 1 }
            for key in swarm.completedPeers { total &+= element(hash, completion: key); count &+= 1 }
        }
        for (hash, stops) in store.stops.bySwarm {
            for (key, at) in stops { total &+= element(hash, stop: PeerStop(key: key, at: at)); count &+= 1 }
        }
        for t in store.catalogue.torrents.values { total &+= element(t); count &+= 1 }
        let access = elements(of: store.catalogue.access)
        total &+= access.sum; count &+= UInt64(access.count)
        for (h, n) in store.catalogue.completedBase { total &+= element(h, completedBase: n); count &+= 1 }
        return finish(sum: total, count: count)
    }

    private static func finish(sum: UInt64, count: UInt64) -> UInt64 {
        var d = Digest()
        d.add(sum, count)
        return d.value
    }
}

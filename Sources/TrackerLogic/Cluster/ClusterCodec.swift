import NIOCore

/// Why bytes from the cluster channel are not a cluster message. Garbage on the broker
/// is logged and dropped; it never traps.
public struct ClusterDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Compact, versioned binary layout for cluster messages, independent of the transport.
///
/// Header (28 bytes): magic "TK" (2), version (1), type (1), from (4), incarnation (8),
/// epoch (8: term << 32 | master id), to (4, 0 = everyone). Integers are big-endian.
/// Lists are a u32 count then the items; a count larger than the remaining bytes could
/// hold is rejected before anything is allocated.
public enum ClusterCodec {
    public static let magic: UInt16 = 0x544B
    public static let version: UInt8 = 1
    /// Longest text field (a keepalive's advertised address).
    public static let maxStringBytes = 1024
    /// Most parts one merge offer may announce (64 swarms each: 64 M swarms).
    public static let maxOfferParts: UInt32 = 1 << 20

    enum Tag: UInt8 {
        case keepalive = 1, election, answer, coordinator, coordinatorAck, prepare, vote, commit, abort
        // Tag 12 was ID-REFUSED, which no node ever sent (a node learns that its id is
        // taken from the other process's own messages): decoded as unknown, and never reused.
        case hello, idAssigned, retiredIDRefused, catchUpRequest, catchUp, snapshot, snapshotAck
        case mergeRequest, mergeOffer, mergeDone, leaving, submit
    }

    public static func encode(_ envelope: ClusterEnvelope) -> ByteBuffer {
        var b = ByteBufferAllocator().buffer(capacity: sizeHint(envelope.message))
        encode(envelope, into: &b)
        return b
    }

    /// Room for the usual message of its kind, allocated once: an empty buffer grows by
    /// doubling from a few bytes, eight reallocations for a 200-byte PREPARE. A longer
    /// message still grows as it is written.
    static func sizeHint(_ m: ClusterMessage) -> Int {
        switch m {
        case .prepare(let tx, _, _): return 96 + 112 * tx.updates.count
        case .catchUp(_, let txs): return 64 + txs.reduce(0) { $0 + 32 + 112 * $1.updates.count }
        default: return 128
        }
    }

    public static func encode(_ e: ClusterEnvelope, into b: inout ByteBuffer) {
        b.writeInteger(magic)
        b.writeInteger(version)
        b.writeInteger(tag(e.message).rawValue)
        b.writeInteger(e.from.rawValue)
        b.writeInteger(e.incarnation)
        b.writeInteger(e.epoch.packed)
        b.writeInteger(e.to?.rawValue ?? 0)
        switch e.message {
        case .keepalive(let k):
            b.writeInteger(k.role.rawValue)
            b.writeInteger(k.master.rawValue)
            write(k.lastCommitted, &b)
            b.writeInteger(k.inSync ? 1 as UInt8 : 0)
            writeString(k.address, &b)
            switch k.brokerEcho {
            case .unknown: break
            case .never: b.writeInteger(BrokerEchoReport.neverCode)
            case .age(let a): b.writeInteger(UInt32(clamping: min(max(a.value, 0), BrokerEchoReport.maxAge.value)))
            }
            if k.brokerEcho != .unknown, let failing = k.peerSendsFailing {
                b.writeInteger(failing ? 1 as UInt8 : 0)
                if let sequence = k.sequence { b.writeInteger(sequence) }
            }
        case .election(let ref), .coordinator(let ref), .catchUpRequest(let ref), .snapshotAck(let ref):
            write(ref, &b)
        case .answer, .mergeRequest, .leaving:
            break
        case .coordinatorAck(let ref, let prepared):
            write(ref, &b)
            if let p = prepared { b.writeInteger(1 as UInt8); write(p, &b) } else { b.writeInteger(0 as UInt8) }
        case .prepare(let tx, let previous, let previousDigest):
            write(tx, &b); write(previous, &b); b.writeInteger(previousDigest)
        case .vote(let txid, let digest, let verdict):
            b.writeInteger(txid); b.writeInteger(digest); b.writeInteger(verdict.rawValue)
        case .commit(let ref, let digest), .abort(let ref, let digest):
            write(ref, &b); b.writeInteger(digest)
        case .hello(let h):
            write(h.lastCommitted, &b); b.writeInteger(h.hasState ? 1 as UInt8 : 0)
        case .idAssigned(let inc, let id):
            b.writeInteger(inc); b.writeInteger(id.rawValue)
        case .catchUp(let after, let txs):
            write(after, &b)
            b.writeInteger(UInt32(txs.count))
            for tx in txs { write(tx, &b) }
        case .snapshot(let s):
            write(s.lastCommitted, &b)
            b.writeInteger(UInt32(s.history.runs.count))
            for run in s.history.runs { b.writeInteger(run.epoch.packed); b.writeInteger(run.firstTxid) }
            b.writeInteger(s.digest)
            writeList(s.content, &b, write)
            writeList(s.torrents, &b, write)
            write(s.access, &b)
            write(s.stamps, &b)
            writeList(s.completedBase.sorted { $0.key < $1.key }, &b) { e, b in e.key.write(to: &b); b.writeInteger(UInt64(clamping: e.value)) }
            // Client rules, then users, came later, and only a snapshot that holds some
            // carries them (users only after the client rules, empty or not), so an older
            // node reads any other.
            let hasUsers = !s.access.users.isEmpty || !s.stamps.users.isEmpty
            if hasUsers || !s.access.clients.isEmpty || !s.stamps.clients.isEmpty {
                writeList(s.access.clients.sortedRules, &b, write)
                writeStamps(s.stamps.clients, &b, write)
            }
            if hasUsers {
                writeList(s.access.users.sorted, &b, write)
                writeStamps(s.stamps.users, &b, write)
            }
        case .mergeOffer(let o):
            b.writeInteger(o.offerID); b.writeInteger(o.part); b.writeInteger(o.parts)
            writeList(o.swarms, &b, write)
            writeList(o.torrents, &b, write)
            writeList(o.access, &b, write)
            if !o.clients.isEmpty || !o.users.isEmpty { writeList(o.clients, &b, write) }
            if !o.users.isEmpty { writeList(o.users, &b, write) }
        case .mergeDone(let id):
            b.writeInteger(id)
        case .submit(let change):
            write(.catalogue(change), &b)
        }
    }

    static func tag(_ m: ClusterMessage) -> Tag {
        switch m {
        case .keepalive: return .keepalive
        case .election: return .election
        case .answer: return .answer
        case .coordinator: return .coordinator
        case .coordinatorAck: return .coordinatorAck
        case .prepare: return .prepare
        case .vote: return .vote
        case .commit: return .commit
        case .abort: return .abort
        case .hello: return .hello
        case .idAssigned: return .idAssigned
        case .catchUpRequest: return .catchUpRequest
        case .catchUp: return .catchUp
        case .snapshot: return .snapshot
        case .snapshotAck: return .snapshotAck
        case .mergeRequest: return .mergeRequest
        case .mergeOffer: return .mergeOffer
        case .mergeDone: return .mergeDone
        case .leaving: return .leaving
        case .submit: return .submit
        }
    }

    // MARK: writing

    static func write(_ ref: TxRef, _ b: inout ByteBuffer) {
        b.writeInteger(ref.epoch.packed); b.writeInteger(ref.txid)
    }

    static func writeString(_ s: String, _ b: inout ByteBuffer) {
        let utf8 = Array(s.utf8.prefix(maxStringBytes))
        b.writeInteger(UInt16(utf8.count)); b.writeBytes(utf8)
    }

    static func writeList<T>(_ items: [T], _ b: inout ByteBuffer, _ one: (T, inout ByteBuffer) -> Void) {
        b.writeInteger(UInt32(items.count))
        for item in items { one(item, &b) }
    }

    static func write(_ tx: Transaction, _ b: inout ByteBuffer) {
        write(tx.ref, &b)
        writeList(tx.updates, &b, write)
    }

    /// An address's layout (read back by `Reader.ip`): family byte, then 4 or 16 bytes.
    static func write(_ ip: IPAddress, _ w: inout BigEndianWriter) {
        w.put(ip.family.rawValue); w.put(ip)
    }

    static func write(_ ip: IPAddress, _ b: inout ByteBuffer) {
        b.writeBigEndian(atMost: maxAddressBytes) { write(ip, &$0) }
    }

    /// A peer record's layout (read back by `Reader.record`): peer id, family byte,
    /// address, port, uploaded, downloaded, left, last announce in milliseconds.
    static func write(_ r: PeerRecord, _ w: inout BigEndianWriter) {
        write(r.key, &w); w.put(r.endpoint.port)
        w.put(r.uploaded); w.put(r.downloaded); w.put(r.left); w.put(r.lastAnnounce.milliseconds)
    }

    /// A peer key's layout (read back by `Reader.key`): peer id, family byte, address.
    static func write(_ k: PeerKey, _ w: inout BigEndianWriter) {
        w.put(k.peerID); write(k.ip, &w)
    }

    /// The longest address, key and record: an IPv6 peer's.
    static let maxAddressBytes = 1 + 16
    static let maxKeyBytes = 20 + maxAddressBytes
    static let maxRecordBytes = maxKeyBytes + 2 + 4 * 8

    static func write(_ r: PeerRecord, _ b: inout ByteBuffer) {
        b.writeBigEndian(atMost: maxRecordBytes) { write(r, &$0) }
    }

    static func write(_ k: PeerKey, _ b: inout ByteBuffer) {
        b.writeBigEndian(atMost: maxKeyBytes) { write(k, &$0) }
    }

    static func write(_ m: SwarmMerge, _ b: inout ByteBuffer) {
        m.infoHash.write(to: &b)
        writeList(m.peers, &b, write)
        writeList(m.completed, &b, write)
        writeList(m.stops, &b) { s, b in write(s.key, &b); b.writeInteger(s.at.milliseconds) }
    }

    package static func write(_ u: SwarmUpdate, _ b: inout ByteBuffer) {
        switch u {
        case .announce(let a):
            writeCompact(a, &b)
        case .expire(let before):
            b.writeInteger(2 as UInt8); b.writeInteger(before.milliseconds)
        case .merge(let m):
            b.writeInteger(3 as UInt8); write(m, &b)
        case .catalogue(.register(let t)):
            b.writeInteger(4 as UInt8); write(t, &b)
        case .catalogue(.unregister(let hash)):
            b.writeInteger(5 as UInt8); hash.write(to: &b)
        case .catalogue(.setAccessMode(let mode)):
            b.writeInteger(6 as UInt8); b.writeInteger(mode.rawValue)
        case .catalogue(.setAccessRule(let rule, let hashes)):
            b.writeInteger(7 as UInt8); b.writeInteger(rule.rawValue); writeList(hashes, &b) { h, b in h.write(to: &b) }
        case .catalogue(.removeAccessRules(let hashes)):
            b.writeInteger(7 as UInt8); b.writeInteger(0 as UInt8); writeList(hashes, &b) { h, b in h.write(to: &b) }
        case .catalogue(.restore(let entries)):
            b.writeInteger(8 as UInt8); writeList(entries, &b, write)
        case .catalogue(.setClientRule(let rule, let prefixes)):
            b.writeInteger(10 as UInt8); b.writeInteger(rule.rawValue); writeList(prefixes, &b, write)
        case .catalogue(.removeClientRules(let prefixes)):
            b.writeInteger(10 as UInt8); b.writeInteger(0 as UInt8); writeList(prefixes, &b, write)
        case .catalogue(.addUser(let u)):
            b.writeInteger(12 as UInt8); b.writeInteger(1 as UInt8); write(u, &b)
        case .catalogue(.editUser(let n, let edit)):
            b.writeInteger(12 as UInt8); b.writeInteger(2 as UInt8); write(n, &b)
            switch edit {
            case .role(let r): b.writeInteger(1 as UInt8); b.writeInteger(r.rawValue)
            case .key(let k): b.writeInteger(2 as UInt8); writeOptional(k?.bytes, &b)
            case .enabled(let e): b.writeInteger(3 as UInt8); b.writeInteger(e ? 1 : 0 as UInt8)
            case .password(let p): b.writeInteger(4 as UInt8); writeOptional(p?.encoded, &b)
            }
        case .catalogue(.removeUser(let n)):
            b.writeInteger(12 as UInt8); b.writeInteger(3 as UInt8); write(n, &b)
        }
    }

    /// Stamps in key order: each key as `key` writes it, its transaction, a removed flag.
    static func writeStamps<Key: Comparable>(_ stamps: [Key: CatalogueStamp], _ b: inout ByteBuffer,
                                             _ key: (Key, inout ByteBuffer) -> Void) {
        writeList(stamps.sorted { $0.key < $1.key }, &b) { entry, b in
            key(entry.key, &b); write(entry.value.ref, &b); b.writeInteger(entry.value.removed ? 1 : 0 as UInt8)
        }
    }

    /// LEB128, as `BigEndianWriter.putVarint` writes it.
    static func writeVarint(_ value: UInt64, _ b: inout ByteBuffer) {
        var v = value
        while v >= 0x80 {
            b.writeInteger(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        b.writeInteger(UInt8(truncatingIfNeeded: v))
    }

    /// A length byte (1–32), then the name's bytes.
    static func write(_ n: UserName, _ b: inout ByteBuffer) {
        let bytes = Array(n.text.utf8)
        b.writeInteger(UInt8(truncatingIfNeeded: bytes.count)); b.writeBytes(bytes)
    }

    /// A flag byte (0 or 1), then the bytes when there are some (their length is fixed by
    /// what they are: a key or a password hash).
    static func writeOptional(_ bytes: [UInt8]?, _ b: inout ByteBuffer) {
        b.writeInteger(bytes == nil ? 0 : 1 as UInt8)
        if let bytes { b.writeBytes(bytes) }
    }

    /// Name, role, then a flag byte (1: enabled, 2: a key follows, 4: a password hash
    /// follows, 8: totals follow), then the key, the hash, and the totals as four LEB128
    /// varints (announces, completed, uploaded, downloaded).
    static func write(_ u: User, _ b: inout ByteBuffer) {
        write(u.name, &b)
        b.writeInteger(u.role.rawValue)
        let flags = (u.enabled ? 1 : 0) | (u.key == nil ? 0 : 2) | (u.password == nil ? 0 : 4) | (u.totals.isZero ? 0 : 8) as UInt8
        b.writeInteger(flags)
        if let k = u.key { b.writeBytes(k.bytes) }
        if let p = u.password { b.writeBytes(p.encoded) }
        if !u.totals.isZero {
            for v in [u.totals.announces, u.totals.completed, u.totals.uploaded, u.totals.downloaded] { writeVarint(v, &b) }
        }
    }

    /// A length byte (1–20), then the prefix's bytes.
    static func write(_ p: ClientPrefix, _ b: inout ByteBuffer) {
        b.writeInteger(UInt8(truncatingIfNeeded: p.bytes.count)); b.writeBytes(p.bytes)
    }

    static func write(_ e: ClientRuleEntry, _ b: inout ByteBuffer) {
        write(e.prefix, &b); b.writeInteger(e.rule.rawValue)
    }

    /// Kind 9, the compact announce: counters and the instant as LEB128 varints. Most of a
    /// PREPARE is announces and it crosses the broker once per follower; a counter of 0 or
    /// a few MiB takes 1–4 bytes rather than 8 (about 58 bytes an announce instead of 81).
    /// Kind 1, the fixed-width form, is still read, so a node of this version follows an
    /// older master through a rolling upgrade.
    ///
    /// Written through one pointer into `b`'s storage (`BigEndianWriter`): as two dozen
    /// `writeInteger`s, each checking the buffer's capacity and uniqueness, the encoding
    /// was 3.5 % of a master's CPU, and a stack buffer filled by nested functions that
    /// captured its index paid a dynamic exclusivity check for every byte (`tracker
    /// bench --replica`'s seal stage).
    static func writeCompact(_ a: Announce, _ b: inout ByteBuffer) {
        let start = b.writerIndex
        b.writeBigEndian(atMost: compactAnnounceBytes) { w in
            w.put(9 as UInt8)
            w.put(a.infoHash)
            w.put(UInt8(truncatingIfNeeded: a.event.rawValue))
            w.put(a.peerID)
            w.put(a.endpoint.ip.family.rawValue)
            w.put(a.endpoint.ip)
            w.put(a.endpoint.port)
            w.putVarint(UInt64(bitPattern: a.uploaded))
            w.putVarint(UInt64(bitPattern: a.downloaded))
            w.putVarint(UInt64(bitPattern: a.left))
            w.putVarint(UInt64(bitPattern: a.at.milliseconds))
        }
        // Kind 11: a compact announce and the user's key (private mode). Only such an
        // announce carries one, so an older node reads every other PREPARE.
        if let k = a.trackerKey {
            b.setInteger(11 as UInt8, at: start)
            b.writeBytes(k.bytes)
        }
    }

    /// The longest compact announce: kind, info hash, event, peer id, family, an IPv6
    /// address, port, and four varints of at most ten bytes.
    static let compactAnnounceBytes = 1 + 20 + 1 + 20 + 1 + 16 + 2 + 4 * 10

    /// A kind byte, what it keeps, then its stamp.
    static func write(_ e: KeptEntry, _ b: inout ByteBuffer) {
        switch e {
        case .torrent(let t, _): b.writeInteger(1 as UInt8); write(t, &b)
        case .torrentRemoved(let hash, _): b.writeInteger(2 as UInt8); hash.write(to: &b)
        case .rule(let hash, let rule, _): b.writeInteger(3 as UInt8); hash.write(to: &b); b.writeInteger(rule.rawValue)
        case .ruleRemoved(let hash, _): b.writeInteger(4 as UInt8); hash.write(to: &b)
        case .mode(let mode, _): b.writeInteger(5 as UInt8); b.writeInteger(mode.rawValue)
        case .client(let p, let rule, _): b.writeInteger(7 as UInt8); write(p, &b); b.writeInteger(rule.rawValue)
        case .clientRemoved(let p, _): b.writeInteger(8 as UInt8); write(p, &b)
        case .user(let u, _): b.writeInteger(9 as UInt8); write(u, &b)
        case .userRemoved(let n, _): b.writeInteger(10 as UInt8); write(n, &b)
        case .completed(let hash, let count):
            // Counts carry no stamp: the highest wins.
            b.writeInteger(6 as UInt8); hash.write(to: &b); b.writeInteger(UInt64(clamping: count))
            return
        }
        write(e.ref, &b)
    }

    /// Each torrent's and each rule's stamp in hash order (hash, stamp, removed), then the
    /// mode's, if it has one.
    static func write(_ stamps: CatalogueStamps, _ b: inout ByteBuffer) {
        for table in [stamps.torrents, stamps.rules] {
            writeList(table.sorted { $0.key < $1.key }, &b) { entry, b in
                entry.key.write(to: &b); write(entry.value.ref, &b); b.writeInteger(entry.value.removed ? 1 : 0 as UInt8)
            }
        }
        if let mode = stamps.mode { b.writeInteger(1 as UInt8); write(mode, &b) } else { b.writeInteger(0 as UInt8) }
    }

    /// The mode, then each rule in hash order.
    static func write(_ access: AccessPolicy, _ b: inout ByteBuffer) {
        b.writeInteger(access.mode.rawValue)
        writeList(access.sortedRules, &b, write)
    }

    static func write(_ e: AccessEntry, _ b: inout ByteBuffer) {
        e.infoHash.write(to: &b); b.writeInteger(e.rule.rawValue)
    }

    /// Only the file and the instant: the receiver derives the rest by parsing the file.
    static func write(_ t: RegisteredTorrent, _ b: inout ByteBuffer) {
        b.writeInteger(t.registeredAt.milliseconds)
        b.writeInteger(UInt32(t.file.count))
        b.writeBytes(t.file)
    }

    // MARK: reading

    public static func decode(_ bytes: ByteBuffer) -> Result<ClusterEnvelope, ClusterDecodingError> {
        do {
            return .success(try bytes.withUnsafeReadableBytes { raw in
                var r = Reader(raw)
                return try r.envelope()
            })
        } catch let e as ClusterDecodingError { return .failure(e) } catch {
            return .failure(ClusterDecodingError("\(error)"))
        }
    }

    /// A kept entry as a store keeps it: the bytes a restore change carries it in.
    public static func encode(_ entry: KeptEntry) -> [UInt8] {
        var b = ByteBuffer()
        write(entry, &b)
        return Array(b.readableBytesView)
    }

    /// A kept entry read back from a store: all of `bytes`, or an error.
    public static func decodeKeptEntry(_ bytes: [UInt8]) -> Result<KeptEntry, ClusterDecodingError> {
        do {
            return .success(try bytes.withUnsafeBytes { raw in
                var r = Reader(raw)
                let entry = try r.keptEntry()
                guard r.remaining == 0 else { throw ClusterDecodingError("\(r.remaining) bytes after a kept entry") }
                return entry
            })
        } catch let e as ClusterDecodingError { return .failure(e) } catch {
            return .failure(ClusterDecodingError("\(error)"))
        }
    }

    /// A merge offer part as a store keeps it (`NodeAction.setAside`): the message that
    /// carries it, so that reading it back checks it as the wire's is.
    public static func encode(_ part: MergeOffer) -> [UInt8] {
        var b = ByteBuffer()
        encode(ClusterEnvelope(from: NodeID(1), incarnation: 0, epoch: .zero, to: nil, message: .mergeOffer(part)), into: &b)
        return Array(b.readableBytesView)
    }

    /// A merge offer part read back from a store: all of `bytes`, or an error.
    public static func decodeMergeOffer(_ bytes: [UInt8]) -> Result<MergeOffer, ClusterDecodingError> {
        var b = ByteBuffer()
        b.writeBytes(bytes)
        switch decode(b) {
        case .success(let env):
            guard case .mergeOffer(let part) = env.message else { return .failure(ClusterDecodingError("not a merge offer")) }
            return .success(part)
        case .failure(let error): return .failure(error)
        }
    }

    /// Reads a message's bytes in place, bounds-checked at every read. Over the raw bytes
    /// rather than the `ByteBuffer`: each of the buffer's reads goes through its storage
    /// object (an exclusivity check and index bookkeeping per integer), and a message is
    /// dozens of integers (profiled: a third of decoding). Lives only inside `decode`.
    struct Reader {
        private let bytes: UnsafeRawBufferPointer
        private var position = 0

        init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        /// Bytes not read yet.
        var remaining: Int { bytes.count - position }

        /// The next `count` bytes, or a truncation error.
        @inline(__always)
        mutating func take(_ count: Int) throws -> UnsafeRawBufferPointer {
            guard count >= 0, count <= remaining else { throw ClusterDecodingError("truncated message") }
            defer { position += count }
            return UnsafeRawBufferPointer(rebasing: bytes[position..<position + count])
        }

        @inline(__always)
        mutating func int<T: FixedWidthInteger>(_: T.Type = T.self) throws -> T {
            T(bigEndian: try take(MemoryLayout<T>.size).loadUnaligned(as: T.self))
        }

        /// A LEB128 varint as `writeCompact` writes it: at most ten bytes, no bit beyond
        /// the 64th, and no trailing zero byte (one value, one encoding).
        mutating func varint() throws -> UInt64 {
            var value: UInt64 = 0
            for i in 0..<10 {
                let byte: UInt8 = try int()
                let bits = UInt64(byte & 0x7F)
                if i == 9 && byte > 1 { throw ClusterDecodingError("varint beyond 64 bits") }
                value |= bits << UInt64(7 * i)
                if byte & 0x80 == 0 {
                    if i > 0 && byte == 0 { throw ClusterDecodingError("varint with a trailing zero byte") }
                    return value
                }
            }
            throw ClusterDecodingError("varint beyond 64 bits")
        }

        mutating func bool() throws -> Bool {
            switch try int(UInt8.self) {
            case 0: return false
            case 1: return true
            case let v: throw ClusterDecodingError("bad boolean \(v)")
            }
        }

        mutating func bytes20() throws -> Bytes20 {
            Bytes20(a: try int(), b: try int(), c: try int())
        }

        mutating func epoch() throws -> Epoch {
            let e = Epoch(packed: try int())
            guard e.isWellFormed else { throw ClusterDecodingError("impossible epoch \(e)") }
            return e
        }

        mutating func ref() throws -> TxRef {
            let ref = TxRef(epoch: Epoch(packed: try int()), txid: try int())
            guard ref.isWellFormed else { throw ClusterDecodingError("impossible transaction reference \(ref)") }
            return ref
        }

        mutating func node() throws -> NodeID {
            let id = NodeID(try int(UInt32.self))
            guard id.isAssigned else { throw ClusterDecodingError("node id 0 where an id is required") }
            return id
        }

        mutating func string() throws -> String {
            let n = Int(try int(UInt16.self))
            guard n <= ClusterCodec.maxStringBytes else { throw ClusterDecodingError("string of \(n) bytes is too long") }
            return String(decoding: try take(n), as: UTF8.self)
        }

        mutating func list<T>(minItemSize: Int, _ one: (inout Reader) throws -> T) throws -> [T] {
            let n = Int(try int(UInt32.self))
            guard n <= remaining / max(minItemSize, 1) else { throw ClusterDecodingError("list of \(n) cannot fit") }
            var out: [T] = []
            out.reserveCapacity(n)
            for _ in 0..<n { out.append(try one(&self)) }
            return out
        }

        mutating func ip() throws -> IPAddress {
            guard let family = IPAddress.Family(rawValue: try int(UInt8.self)) else { throw ClusterDecodingError("bad address family") }
            switch family {
            case .v4: return .v4(try int())
            case .v6: return .v6(try int(), try int())
            }
        }

        mutating func record() throws -> PeerRecord {
            let id = try bytes20()
            let ip = try ip()
            let port: UInt16 = try int()
            return PeerRecord(peerID: id, endpoint: PeerEndpoint(ip: ip, port: port), uploaded: try int(), downloaded: try int(),
                              left: try int(), lastAnnounce: Instant(milliseconds: try int()))
        }

        mutating func torrent() throws -> RegisteredTorrent {
            let at = Instant(milliseconds: try int())
            let n = Int(try int(UInt32.self))
            guard n <= TorrentMetadata.maxFileBytes else { throw ClusterDecodingError("torrent file of \(n) bytes is over the limit") }
            let file = Array(try take(n))
            do { return try RegisteredTorrent(file: file, registeredAt: at) } catch {
                throw ClusterDecodingError("registered torrent: \(error)")
            }
        }

        mutating func accessMode() throws -> AccessMode {
            let raw: UInt8 = try int()
            guard let mode = AccessMode(rawValue: raw) else { throw ClusterDecodingError("bad access mode \(raw)") }
            return mode
        }

        mutating func access() throws -> AccessPolicy {
            let mode = try accessMode()
            return AccessPolicy(mode: mode, rules: try accessEntries())
        }

        mutating func accessEntries() throws -> [AccessEntry] {
            let rules = try list(minItemSize: 21) { r -> AccessEntry in
                let hash = try r.bytes20()
                let raw: UInt8 = try r.int()
                guard let rule = AccessRule(rawValue: raw) else { throw ClusterDecodingError("bad access rule \(raw)") }
                return AccessEntry(infoHash: hash, rule: rule)
            }
            guard rules.count <= AccessPolicy.maxRules else { throw ClusterDecodingError("access list of \(rules.count) rules") }
            return rules
        }

        mutating func keptEntry() throws -> KeptEntry {
            let kind: UInt8 = try int()
            switch kind {
            case 1: let t = try torrent(); return .torrent(t, try ref())
            case 2: let h = try bytes20(); return .torrentRemoved(h, try ref())
            case 3:
                let h = try bytes20()
                let raw: UInt8 = try int()
                guard let rule = AccessRule(rawValue: raw) else { throw ClusterDecodingError("bad access rule \(raw)") }
                return .rule(h, rule, try ref())
            case 4: let h = try bytes20(); return .ruleRemoved(h, try ref())
            case 5: let m = try accessMode(); return .mode(m, try ref())
            case 6:
                let h = try bytes20()
                let count: UInt64 = try int()
                guard count <= UInt64(UInt32.max) else { throw ClusterDecodingError("completion count \(count)") }
                return .completed(h, Int(count))
            case 7:
                let p = try clientPrefix()
                return .client(p, try accessRule(), try ref())
            case 8: let p = try clientPrefix(); return .clientRemoved(p, try ref())
            case 9: let u = try user(); return .user(u, try ref())
            case 10: let n = try userName(); return .userRemoved(n, try ref())
            default: throw ClusterDecodingError("bad kept entry kind \(kind)")
            }
        }

        mutating func userName() throws -> UserName {
            let n: UInt8 = try int()
            guard n >= 1, Int(n) <= UserName.maxLength, let name = UserName(String(decoding: try take(Int(n)), as: UTF8.self)),
                  name.text.utf8.count == Int(n)
            else { throw ClusterDecodingError("bad user name of \(n) bytes") }
            return name
        }

        mutating func trackerKey() throws -> TrackerKey {
            guard let k = TrackerKey(bytes: try take(TrackerKey.length)) else { throw ClusterDecodingError("bad tracker key") }
            return k
        }

        mutating func passwordHash() throws -> PasswordHash {
            guard let p = PasswordHash(encoded: try take(PasswordHash.length)) else { throw ClusterDecodingError("bad password hash") }
            return p
        }

        mutating func userRole() throws -> UserRole {
            let raw: UInt8 = try int()
            guard let role = UserRole(rawValue: raw) else { throw ClusterDecodingError("bad user role \(raw)") }
            return role
        }

        /// A flag byte: 0, or 1 and then what `read` reads.
        mutating func optional<T>(_ read: (inout Reader) throws -> T) throws -> T? {
            let flag: UInt8 = try int()
            guard flag <= 1 else { throw ClusterDecodingError("bad flag \(flag)") }
            return flag == 1 ? try read(&self) : nil
        }

        mutating func user() throws -> User {
            let name = try userName()
            let role = try userRole()
            let flags: UInt8 = try int()
            guard flags & ~15 == 0 else { throw ClusterDecodingError("bad user flags \(flags)") }
            let key = flags & 2 != 0 ? try trackerKey() : nil
            let password = flags & 4 != 0 ? try passwordHash() : nil
            var totals = UserTotals()
            if flags & 8 != 0 {
                totals = UserTotals(announces: try varint(), completed: try varint(), uploaded: try varint(), downloaded: try varint())
            }
            return User(name: name, role: role, key: key, enabled: flags & 1 != 0, password: password, totals: totals)
        }

        mutating func users() throws -> [User] {
            let users = try list(minItemSize: 4) { try $0.user() }
            guard users.count <= UserDirectory.maxUsers else { throw ClusterDecodingError("\(users.count) users") }
            return users
        }

        /// The users' stamps: at most a full directory and a full set of tombstones.
        mutating func userStamps() throws -> [UserName: CatalogueStamp] {
            try stampTable(minItemSize: 19, limit: UserDirectory.maxUsers, of: "user") { try $0.userName() }
        }

        /// Stamps by key (a key, its transaction, a removed flag): at most `limit` entries
        /// and a full set of tombstones.
        mutating func stampTable<Key: Hashable>(minItemSize: Int, limit: Int, of kind: String,
                                                key: (inout Reader) throws -> Key) throws -> [Key: CatalogueStamp] {
            let rows = try list(minItemSize: minItemSize) { r -> (Key, CatalogueStamp) in
                let k = try key(&r)
                let ref = try r.ref()
                let removed: UInt8 = try r.int()
                guard removed <= 1 else { throw ClusterDecodingError("bad stamp flag \(removed)") }
                return (k, CatalogueStamp(ref: ref, removed: removed == 1))
            }
            guard rows.count <= limit + CatalogueStamps.maxTombstones else { throw ClusterDecodingError("\(rows.count) \(kind) stamps") }
            return Dictionary(rows, uniquingKeysWith: { _, last in last })
        }

        mutating func accessRule() throws -> AccessRule {
            let raw: UInt8 = try int()
            guard let rule = AccessRule(rawValue: raw) else { throw ClusterDecodingError("bad access rule \(raw)") }
            return rule
        }

        mutating func clientPrefix() throws -> ClientPrefix {
            let n: UInt8 = try int()
            guard let p = ClientPrefix(bytes: Array(try take(Int(n)))) else { throw ClusterDecodingError("client prefix of \(n) bytes") }
            return p
        }

        mutating func clientEntries() throws -> [ClientRuleEntry] {
            let rules = try list(minItemSize: 3) { r in ClientRuleEntry(prefix: try r.clientPrefix(), rule: try r.accessRule()) }
            guard rules.count <= ClientFilter.maxRules else { throw ClusterDecodingError("client list of \(rules.count) rules") }
            return rules
        }

        /// The client rules' stamps: at most a full list and a full set of tombstones.
        mutating func clientStamps() throws -> [ClientPrefix: CatalogueStamp] {
            // The shortest entry: a prefix of one byte (its length, the byte), a ref, the flag.
            try stampTable(minItemSize: 19, limit: ClientFilter.maxRules, of: "client") { try $0.clientPrefix() }
        }

        /// At most a full catalogue's entries and a full set of tombstones of each kind.
        mutating func stamps() throws -> CatalogueStamps {
            func table(limit: Int, _ r: inout Reader) throws -> [InfoHash: CatalogueStamp] {
                let rows = try r.list(minItemSize: 37) { r -> (InfoHash, CatalogueStamp) in
                    let hash = try r.bytes20()
                    let ref = try r.ref()
                    let removed: UInt8 = try r.int()
                    guard removed <= 1 else { throw ClusterDecodingError("bad stamp flag \(removed)") }
                    return (hash, CatalogueStamp(ref: ref, removed: removed == 1))
                }
                guard rows.count <= limit + CatalogueStamps.maxTombstones else { throw ClusterDecodingError("\(rows.count) stamps") }
                return Dictionary(rows, uniquingKeysWith: { _, last in last })
            }
            let torrents = try table(limit: Catalogue.maxTorrents, &self)
            let rules = try table(limit: AccessPolicy.maxRules, &self)
            let hasMode: UInt8 = try int()
            guard hasMode <= 1 else { throw ClusterDecodingError("bad stamp flag \(hasMode)") }
            return CatalogueStamps(torrents: torrents, rules: rules, mode: hasMode == 1 ? try ref() : nil)
        }

        mutating func key() throws -> PeerKey { PeerKey(peerID: try bytes20(), ip: try ip()) }

        mutating func merge() throws -> SwarmMerge {
            SwarmMerge(infoHash: try bytes20(), peers: try list(minItemSize: 59) { try $0.record() },
                       completed: try list(minItemSize: 25) { try $0.key() },
                       stops: try list(minItemSize: 33) { PeerStop(key: try $0.key(), at: Instant(milliseconds: try $0.int())) })
        }

        mutating func update() throws -> SwarmUpdate {
            switch try int(UInt8.self) {
            case 1:
                let hash = try bytes20()
                guard let event = AnnounceEvent(rawValue: UInt32(try int(UInt8.self))) else { throw ClusterDecodingError("bad event") }
                let r = try record()
                return .announce(Announce(infoHash: hash, peerID: r.peerID, endpoint: r.endpoint, uploaded: r.uploaded,
                                          downloaded: r.downloaded, left: r.left, event: event, at: r.lastAnnounce))
            case let kind where kind == 9 || kind == 11:
                let hash = try bytes20()
                guard let event = AnnounceEvent(rawValue: UInt32(try int(UInt8.self))) else { throw ClusterDecodingError("bad event") }
                let id = try bytes20()
                let ip = try ip()
                let port: UInt16 = try int()
                let uploaded = Int64(bitPattern: try varint()), downloaded = Int64(bitPattern: try varint())
                let left = Int64(bitPattern: try varint())
                let at = Instant(milliseconds: Int64(bitPattern: try varint()))
                return .announce(Announce(infoHash: hash, peerID: id, endpoint: PeerEndpoint(ip: ip, port: port), uploaded: uploaded,
                                          downloaded: downloaded, left: left, event: event, at: at,
                                          trackerKey: kind == 11 ? try trackerKey() : nil))
            case 2: return .expire(before: Instant(milliseconds: try int()))
            case 3: return .merge(try merge())
            case 4: return .catalogue(.register(try torrent()))
            case 5: return .catalogue(.unregister(try bytes20()))
            case 6: return .catalogue(.setAccessMode(try accessMode()))
            case 7:
                let raw: UInt8 = try int()
                let hashes = try list(minItemSize: 20) { try $0.bytes20() }
                guard !hashes.isEmpty, hashes.count <= AccessPolicy.maxHashesPerChange else {
                    throw ClusterDecodingError("access change of \(hashes.count) info hashes")
                }
                if raw == 0 { return .catalogue(.removeAccessRules(hashes)) }
                guard let rule = AccessRule(rawValue: raw) else { throw ClusterDecodingError("bad access rule \(raw)") }
                return .catalogue(.setAccessRule(rule, hashes))
            case 8:
                let entries = try list(minItemSize: 18) { try $0.keptEntry() }
                guard !entries.isEmpty, entries.count <= AccessPolicy.maxHashesPerChange else {
                    throw ClusterDecodingError("restore of \(entries.count) entries")
                }
                return .catalogue(.restore(entries))
            case 10:
                let raw: UInt8 = try int()
                let prefixes = try list(minItemSize: 2) { try $0.clientPrefix() }
                guard !prefixes.isEmpty, prefixes.count <= AccessPolicy.maxHashesPerChange else {
                    throw ClusterDecodingError("client change of \(prefixes.count) prefixes")
                }
                if raw == 0 { return .catalogue(.removeClientRules(prefixes)) }
                guard let rule = AccessRule(rawValue: raw) else { throw ClusterDecodingError("bad access rule \(raw)") }
                return .catalogue(.setClientRule(rule, prefixes))
            case 12:
                switch try int(UInt8.self) {
                case 1: return .catalogue(.addUser(try user()))
                case 2:
                    let name = try userName()
                    let edit: UserEdit = switch try int(UInt8.self) {
                    case 1: .role(try userRole())
                    case 2: .key(try optional { try $0.trackerKey() })
                    case 3: .enabled(try bool())
                    case 4: .password(try optional { try $0.passwordHash() })
                    case let e: throw ClusterDecodingError("bad user edit \(e)")
                    }
                    return .catalogue(.editUser(name, edit))
                case 3: return .catalogue(.removeUser(try userName()))
                case let k: throw ClusterDecodingError("bad user change \(k)")
                }
            case let t: throw ClusterDecodingError("bad update kind \(t)")
            }
        }

        mutating func transaction() throws -> Transaction {
            let ref = try ref()
            guard ref.txid > 0 else { throw ClusterDecodingError("transaction #0") }
            return Transaction(ref: ref, updates: try list(minItemSize: 2) { try $0.update() })  // an access mode: 2 bytes
        }

        mutating func envelope() throws -> ClusterEnvelope {
            guard try int(UInt16.self) == ClusterCodec.magic else { throw ClusterDecodingError("not a cluster message (bad magic)") }
            let v: UInt8 = try int()
            guard v == ClusterCodec.version else { throw ClusterDecodingError("unsupported cluster protocol version \(v)") }
            let rawTag: UInt8 = try int()
            guard let tag = Tag(rawValue: rawTag) else { throw ClusterDecodingError("unknown message type \(rawTag)") }
            let from = NodeID(try int(UInt32.self))
            // Only a node asking for an id (`--id auto`) speaks without one.
            guard from.isAssigned || tag == .hello else { throw ClusterDecodingError("sender id 0 on \(tag)") }
            let incarnation: UInt64 = try int()
            let epoch = try epoch()
            let toRaw: UInt32 = try int()
            let message: ClusterMessage
            switch tag {
            case .keepalive:
                guard let role = Role(rawValue: try int()) else { throw ClusterDecodingError("bad role") }
                var k = Keepalive(role: role, master: NodeID(try int()), lastCommitted: try ref(), inSync: try bool(),
                                  address: try string())
                // The broker echo came later: a keepalive without it is an older node's.
                if remaining > 0 {
                    let code: UInt32 = try int()
                    k.brokerEcho = code == BrokerEchoReport.neverCode ? .never : .age(Milliseconds(Int64(code)))
                    // Then whether its peer sends fail: a later addition again.
                    if remaining > 0 {
                        k.peerSendsFailing = try bool()
                        // Then its sequence number.
                        if remaining > 0 { k.sequence = try int() as UInt64 }
                    }
                }
                message = .keepalive(k)
            case .election: message = .election(lastCommitted: try ref())
            case .answer: message = .answer
            case .coordinator: message = .coordinator(lastCommitted: try ref())
            case .coordinatorAck:
                let ref = try ref()
                message = .coordinatorAck(lastCommitted: ref, prepared: try bool() ? try transaction() : nil)
            case .prepare: message = .prepare(try transaction(), previous: try ref(), previousDigest: try int())
            case .vote:
                let txid: UInt64 = try int(), digest: UInt64 = try int()
                guard let verdict = Verdict(rawValue: try int()) else { throw ClusterDecodingError("bad vote verdict") }
                message = .vote(txid: txid, digest: digest, verdict: verdict)
            case .commit: message = .commit(try ref(), digest: try int())
            case .abort: message = .abort(try ref(), digest: try int())
            case .hello: message = .hello(Hello(lastCommitted: try ref(), hasState: try bool()))
            case .idAssigned: message = .idAssigned(incarnation: try int(), id: try node())
            case .retiredIDRefused: throw ClusterDecodingError("unknown message type 12")
            case .catchUpRequest: message = .catchUpRequest(after: try ref())
            case .catchUp: message = .catchUp(after: try ref(), try list(minItemSize: 20) { try $0.transaction() })
            case .snapshot:
                let last = try ref()
                let runs = try list(minItemSize: 16) { EpochHistory.Run(epoch: try $0.epoch(), firstTxid: try $0.int()) }
                let digest: UInt64 = try int()
                let content = try list(minItemSize: 32) { try $0.merge() }
                let torrents = try list(minItemSize: 12) { try $0.torrent() }
                var access = try access()
                var stamps = try stamps()
                let bases = try list(minItemSize: 28) { r -> (InfoHash, Int) in
                    let h = try r.bytes20()
                    let n: UInt64 = try r.int()
                    guard n <= UInt64(UInt32.max) else { throw ClusterDecodingError("completion count \(n)") }
                    return (h, Int(n))
                }
                guard bases.count <= 2 * Catalogue.maxTorrents else { throw ClusterDecodingError("\(bases.count) completion counts") }
                if remaining > 0 {
                    let clients = try clientEntries(), clientStamps = try clientStamps()
                    let users = remaining > 0 ? try users() : [], userStamps = remaining > 0 ? try userStamps() : [:]
                    access = AccessPolicy(mode: access.mode, rules: access.sortedRules, clients: clients, users: users)
                    stamps = CatalogueStamps(torrents: stamps.torrents, rules: stamps.rules, mode: stamps.mode, clients: clientStamps,
                                             users: userStamps)
                }
                let snapshot = Snapshot(lastCommitted: last, history: EpochHistory(runs: runs), content: content, torrents: torrents,
                                        access: access, stamps: stamps, completedBase: Dictionary(bases, uniquingKeysWith: { _, b in b }),
                                        digest: digest)
                guard snapshot.isWellFormed else { throw ClusterDecodingError("snapshot with an impossible epoch history") }
                message = .snapshot(snapshot)
            case .snapshotAck: message = .snapshotAck(try ref())
            case .mergeRequest: message = .mergeRequest
            case .mergeOffer:
                let offerID: UInt64 = try int(), part: UInt32 = try int(), parts: UInt32 = try int()
                guard part < parts, parts <= ClusterCodec.maxOfferParts else { throw ClusterDecodingError("merge offer part \(part) of \(parts)") }
                let swarms = try list(minItemSize: 32) { try $0.merge() }
                let torrents = try list(minItemSize: 12) { try $0.torrent() }
                let access = try accessEntries()
                let clients = remaining > 0 ? try clientEntries() : []
                message = .mergeOffer(MergeOffer(offerID: offerID, part: part, parts: parts, swarms: swarms, torrents: torrents,
                                                 access: access, clients: clients, users: remaining > 0 ? try users() : []))
            case .mergeDone: message = .mergeDone(offerID: try int())
            case .leaving: message = .leaving
            case .submit:
                // Only catalogue changes may be forwarded: never announces, expiries or merges.
                guard case .catalogue(let change) = try update() else { throw ClusterDecodingError("submit of something other than a catalogue change") }
                message = .submit(change)
            }
            guard remaining == 0 else { throw ClusterDecodingError("\(remaining) trailing bytes") }
            return ClusterEnvelope(from: from, incarnation: incarnation, epoch: epoch, to: toRaw == 0 ? nil : NodeID(toRaw), message: message)
        }
    }
}

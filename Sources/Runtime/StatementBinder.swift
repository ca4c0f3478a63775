import GRDB
import GRDBSQLite
import NIOCore
import TrackerLogic

/// Binds one row's values straight into a prepared statement and runs it. A peer image
/// writes a row per peer; through GRDB's `StatementArguments` each row built an array
/// of existentials and a copy of every string, about half of the row's CPU. Info
/// hashes and peer ids go in as their bytes, from the stack. Used only inside a GRDB
/// write, on a statement GRDB compiled and caches.
struct StatementBinder {
    private let handle: OpaquePointer
    private let connection: OpaquePointer?
    private var index: Int32 = 1
    private var failure: Int32 = SQLITE_OK
    /// SQLite copies the bytes before the bind call returns.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    init(_ statement: Statement, in db: Database) {
        handle = statement.sqliteStatement
        connection = db.sqliteConnection
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    private mutating func next(_ rc: Int32) {
        if rc != SQLITE_OK && failure == SQLITE_OK { failure = rc }
        index += 1
    }

    mutating func bind(_ value: Int64) { next(sqlite3_bind_int64(handle, index, value)) }

    /// An info hash or peer id as its twenty bytes, in wire order, from the stack.
    mutating func bind(_ value: Bytes20) {
        let rc = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { bytes in
            let count = value.write(to: bytes)
            return sqlite3_bind_blob(handle, index, bytes.baseAddress, Int32(count), Self.transient)
        }
        next(rc)
    }

    /// A peer's key: its info hash, peer id and address.
    mutating func bind(_ hash: InfoHash, _ key: PeerKey) {
        bind(hash)
        bind(key.peerID)
        bind(key.ip)
    }

    /// A peer row: its key, then its values.
    mutating func bind(_ hash: InfoHash, _ r: PeerRecord) {
        bind(hash, r.key)
        bindValues(of: r)
    }

    /// A buffer's readable bytes as a blob.
    mutating func bind(_ bytes: ByteBuffer) {
        let rc = bytes.withUnsafeReadableBytes { raw in
            sqlite3_bind_blob(handle, index, raw.baseAddress, Int32(clamping: raw.count), Self.transient)
        }
        next(rc)
    }

    /// A peer row's values after its key: port, byte counts, last announce.
    mutating func bindValues(of r: PeerRecord) {
        bind(Int64(r.endpoint.port))
        bind(r.uploaded)
        bind(r.downloaded)
        bind(r.left)
        bind(r.lastAnnounce.milliseconds)
    }

    /// An address as the text every reader of the repository sees (`IPAddress.description`).
    /// An IPv4 address, nearly every peer's, is formatted on the stack: the string the
    /// description builds was a fifth of the peer log's CPU.
    mutating func bind(_ ip: IPAddress) {
        guard case .v4(let v) = ip else { return bind(ip.description) }
        let rc = withUnsafeTemporaryAllocation(of: CChar.self, capacity: 16) { text in
            var n = 0
            for shift in [24, 16, 8, 0] as [UInt32] {
                if shift != 24 { text[n] = 0x2E; n += 1 }  // "."
                let octet = Int(v >> shift & 0xFF)
                if octet >= 100 { text[n] = CChar(0x30 + octet / 100); n += 1 }
                if octet >= 10 { text[n] = CChar(0x30 + octet / 10 % 10); n += 1 }
                text[n] = CChar(0x30 + octet % 10); n += 1
            }
            return sqlite3_bind_text(handle, index, text.baseAddress, Int32(n), Self.transient)
        }
        next(rc)
    }

    mutating func bind(_ value: String) {
        var value = value
        let rc = value.withUTF8 { utf8 in
            utf8.withMemoryRebound(to: CChar.self) { sqlite3_bind_text(handle, index, $0.baseAddress, Int32(clamping: $0.count), Self.transient) }
        }
        next(rc)
    }

    /// Runs a statement that selects one integer (a count), once.
    func count() throws -> Int {
        let rc = failure == SQLITE_OK ? sqlite3_step(handle) : failure
        defer { sqlite3_reset(handle) }
        guard rc == SQLITE_ROW else {
            let message = connection.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
            throw DatabaseError(resultCode: ResultCode(rawValue: rc), message: message)
        }
        return Int(sqlite3_column_int64(handle, 0))
    }

    /// Runs the statement once; an error (a full disk, a bad bind) comes back as a
    /// `DatabaseError` with SQLite's message, and the caller's transaction rolls back.
    func step(sql: String) throws {
        let rc = failure == SQLITE_OK ? sqlite3_step(handle) : failure
        sqlite3_reset(handle)
        guard rc == SQLITE_DONE else {
            let message = connection.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
            throw DatabaseError(resultCode: ResultCode(rawValue: rc), message: message, sql: sql)
        }
    }
}

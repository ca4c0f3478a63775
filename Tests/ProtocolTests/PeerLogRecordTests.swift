import NIOCore
import Testing
import TrackerLogic

/// The bytes a store's log keeps per commit (`PeerLogRecord`), and what reading them back
/// refuses: the file is input like any other.
@Suite struct PeerLogRecordTests {
    let hash = InfoHash(a: 0x0102_0304_0506_0708, b: 0x090A_0B0C_0D0E_0F10, c: 0x1112_1314)
    let peer = PeerID(a: 0x2122_2324_2526_2728, b: 0x292A_2B2C_2D2E_2F30, c: 0x3132_3334)

    var written: PeerRecord {
        PeerRecord(peerID: peer, endpoint: PeerEndpoint(ip: .v4(0x0A00_0001), port: 6881), uploaded: 1, downloaded: -2,
                   left: 0x0102, lastAnnounce: Instant(milliseconds: 0x0102_0304_0506))
    }
    var removedKey: PeerKey { PeerKey(peerID: peer, ip: .v6(0x2001_0DB8_0000_0000, 1)) }

    func bytes(_ record: PeerLogRecord) -> [UInt8] { Array(record.bytes.readableBytesView) }

    @Test func aWrittenRowAndARemovalInTheirBytes() {
        var record = PeerLogRecord()
        record.append(hash, written.key, written)
        record.append(hash, removedKey, nil)
        let hashBytes: [UInt8] = Array(1...20), peerBytes: [UInt8] = Array(0x21...0x34)
        let expected: [UInt8] = [0x01]
            + [0x01] + hashBytes + peerBytes + [0x04, 0x0A, 0x00, 0x00, 0x01] + [0x1A, 0xE1]
            + [0, 0, 0, 0, 0, 0, 0, 1] + [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE] + [0, 0, 0, 0, 0, 0, 0x01, 0x02]
            + [0, 0, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06]
            + [0x00] + hashBytes + peerBytes + [0x06, 0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
        #expect(bytes(record) == expected)
        #expect(record.rows == 2)
        #expect(PeerLogRecord.decode(expected) == .success([.written(hash, written), .removed(hash, removedKey)]))
    }

    /// The longest row (a written IPv6 peer) and a record that outgrows its first
    /// allocation many times over read back as written, in order.
    @Test func manyRowsOfBothFamiliesReadBack() {
        var record = PeerLogRecord()
        var rows: [PeerLogRow] = []
        for i in 0..<1000 {
            let ip: IPAddress = i % 2 == 0 ? .v6(0x2001_0DB8_0000_0000 | UInt64(i), UInt64.max - UInt64(i)) : .v4(UInt32(i))
            let id = PeerID(a: UInt64(i), b: 0xFFFF_0000_FFFF_0000, c: UInt32(i))
            let r = PeerRecord(peerID: id, endpoint: PeerEndpoint(ip: ip, port: UInt16(i)), uploaded: Int64(i) << 40,
                               downloaded: -Int64(i), left: Int64.max - Int64(i), lastAnnounce: Instant(milliseconds: Int64(i)))
            let row: PeerLogRow = i % 3 == 0 ? .removed(hash, r.key) : .written(hash, r)
            record.append(hash, row.key, row.record)
            rows.append(row)
        }
        #expect(record.rows == 1000)
        #expect(PeerLogRecord.decode(bytes(record)) == .success(rows))
        var longest = PeerLogRecord()
        longest.append(hash, rows[2].key, rows[2].record)
        #expect(rows[2].record?.endpoint.ip.family == .v6 && bytes(longest).count == 1 + PeerLogRecordTests.longestRow)
    }

    /// Tag, hash, peer id, family, 16 address bytes, port, four 8-byte integers.
    static let longestRow = 1 + 20 + 20 + 1 + 16 + 2 + 32

    @Test func anEmptyRecordIsItsFormatByte() {
        let record = PeerLogRecord()
        #expect(record.isEmpty && bytes(record) == [0x01])
        #expect(PeerLogRecord.decode([0x01]) == .success([]))
    }

    /// Every prefix of a valid record that cuts a row, another format, an unknown tag, an
    /// unknown address family: an error, never a trap.
    @Test func bytesNoWriterLeavesAreRefused() {
        var record = PeerLogRecord()
        record.append(hash, written.key, written)
        let valid = bytes(record)
        for cut in 0..<valid.count where cut != 1 {
            guard case .failure = PeerLogRecord.decode(Array(valid.prefix(cut))) else {
                Issue.record("a record cut to \(cut) bytes was read")
                continue
            }
        }
        var otherFormat = valid, badTag = valid, badFamily = valid
        otherFormat[0] = 2
        badTag[1] = 7
        badFamily[42] = 5
        for bad in [otherFormat, badTag, badFamily] {
            guard case .failure = PeerLogRecord.decode(bad) else {
                Issue.record("\(bad.prefix(4)) was read")
                continue
            }
        }
    }
}

/// Names the client behind a peer id from the two common conventions (BEP 20): Azureus
/// style `-XXVVVV-` (two letters, four version characters) and Mainline style
/// `M1-2-3--`. Unknown codes give nil: the dashboard shows the id alone rather than guess.
public enum PeerClient {
    static let azureus: [String: String] = [
        "AZ": "Vuze", "BC": "BitComet", "BI": "BiglyBT", "BT": "BitTorrent", "DE": "Deluge", "FD": "Free Download Manager",
        "FW": "FrostWire", "KT": "KTorrent", "LT": "libtorrent", "lt": "libTorrent (rakshasa)", "PI": "PicoTorrent",
        "qB": "qBittorrent", "RT": "rTorrent", "SD": "Thunder", "TL": "Tribler", "TR": "Transmission", "UM": "µTorrent Mac",
        "UT": "µTorrent", "UW": "µTorrent Web", "WD": "WebTorrent Desktop", "WW": "WebTorrent", "XL": "Xunlei",
        "BW": "BitWombat", "HL": "Halite", "LW": "LimeWire", "TT": "TuoTu", "VG": "Vagaa",
    ]

    public static func name(of peerID: PeerID) -> String? {
        let b = peerID.bytes
        // Azureus style: '-', two letters, four version characters, '-'.
        if b[0] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[1...6].allSatisfy(isPrintable) {
            let code = String(decoding: b[1...2], as: UTF8.self)
            guard let client = azureus[code] else { return nil }
            return "\(client) \(azureusVersion(Array(b[3...6])))"
        }
        // aria2 writes `A2-1-35-0-`.
        if b[0] == UInt8(ascii: "A"), b[1] == UInt8(ascii: "2"), b[2] == UInt8(ascii: "-"),
           let version = dashedVersion(Array(b[3...])) {
            return "aria2 \(version)"
        }
        // Mainline style: one letter then a dashed version, e.g. `M7-4-3--`.
        if b[0] == UInt8(ascii: "M"), let version = dashedVersion(Array(b[1...])) {
            return "BitTorrent (mainline) \(version)"
        }
        return nil
    }

    static func isPrintable(_ byte: UInt8) -> Bool { byte >= 0x21 && byte < 0x7F }

    /// `3000` → 3.0.0.0, trailing zeros dropped to two parts; letters (as in `40B0`) kept.
    static func azureusVersion(_ digits: [UInt8]) -> String {
        var parts = digits.map { String(decoding: [$0], as: UTF8.self) }
        while parts.count > 2, parts.last == "0" { parts.removeLast() }
        return parts.joined(separator: ".")
    }

    /// Digits separated by single dashes, ended by a dash: `7-4-3--` → 7.4.3. What follows
    /// the last dash (random bytes, in aria2's ids) is not read.
    static func dashedVersion(_ bytes: [UInt8]) -> String? {
        var parts: [String] = []
        var current: [UInt8] = []
        for byte in bytes {
            if byte == UInt8(ascii: "-") {
                if current.isEmpty { break }
                parts.append(String(decoding: current, as: UTF8.self))
                current = []
            } else if byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), current.count < 3 {
                current.append(byte)
            } else if current.isEmpty, !parts.isEmpty {
                break
            } else {
                return nil
            }
        }
        return parts.count >= 2 && current.isEmpty ? parts.joined(separator: ".") : nil
    }
}

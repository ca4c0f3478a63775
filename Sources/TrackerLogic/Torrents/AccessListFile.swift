/// A list of info hashes as operators keep them (opentracker's whitelist and blacklist
/// files, aquatic's access list): one hash of forty hex digits per line; blank lines and
/// everything from a `#` on are ignored. The file is input like any other: a line that is
/// not a hash is an error naming its line, not a hash skipped in silence.
public enum AccessListFile {
    public struct Problem: Error, Equatable, CustomStringConvertible {
        public var line: Int
        public var text: String
        public var description: String { "line \(line): not an info hash (40 hex digits): \(text)" }
        public init(line: Int, text: String) { self.line = line; self.text = text }
    }

    /// Most lines read (a file longer than the access list can hold is refused whole).
    public static let maxLines = 1_000_000

    /// The hashes in file order, each once.
    public static func parse(_ text: String) -> Result<[InfoHash], Problem> {
        var seen = Set<InfoHash>()
        var out: [InfoHash] = []
        var number = 0
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            number += 1
            guard number <= maxLines else { return .failure(Problem(line: number, text: "more than \(maxLines) lines")) }
            let line = (raw.firstIndex(of: "#").map { raw[..<$0] } ?? raw[...]).trimmingWhitespace()
            if line.isEmpty { continue }
            guard let hash = InfoHash(hex: line) else { return .failure(Problem(line: number, text: String(line.prefix(60)))) }
            if seen.insert(hash).inserted { out.append(hash) }
        }
        return .success(out)
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs.
    func trimmingWhitespace() -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return self[first...last]
    }
}
